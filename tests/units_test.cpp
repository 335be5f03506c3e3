#include <catch2/catch.hpp>

#include "fleetsim/suggest.hpp"
#include "fleetsim/units.hpp"

using fleetsim::Dimension;
using fleetsim::parse_quantity;
using fleetsim::UnitError;
using fleetsim::format_number;

TEST_CASE("sizes parse in SI, binary and bit units", "[units]") {
  CHECK(parse_quantity("80 GB", Dimension::bytes) == 80e9);
  CHECK(parse_quantity("80 GiB", Dimension::bytes) == 80.0 * 1024 * 1024 * 1024);
  CHECK(parse_quantity("512MB", Dimension::bytes) == 512e6);
  CHECK(parse_quantity("  1.5 TiB ", Dimension::bytes) == 1.5 * 1099511627776.0);
  CHECK(parse_quantity("8 Gb", Dimension::bytes) == 1e9);
  CHECK(parse_quantity("0 B", Dimension::bytes) == 0.0);
}

TEST_CASE("bandwidths distinguish bytes from bits", "[units]") {
  CHECK(parse_quantity("900 GB/s", Dimension::bandwidth) == 900e9);
  CHECK(parse_quantity("400 Gb/s", Dimension::bandwidth) == 50e9);
  CHECK(parse_quantity("3.35 TB/s", Dimension::bandwidth) == Approx(3.35e12));
}

TEST_CASE("compute, time, power and rates", "[units]") {
  CHECK(parse_quantity("989 TFLOP/s", Dimension::flop_rate) == 989e12);
  CHECK(parse_quantity("67 TFLOPS", Dimension::flop_rate) == 67e12);
  CHECK(parse_quantity("1.2 PFLOP", Dimension::flop) == Approx(1.2e15));
  CHECK(parse_quantity("2.5 ms", Dimension::time) == Approx(2.5e-3));
  CHECK(parse_quantity("4 us", Dimension::time) == Approx(4e-6));
  CHECK(parse_quantity("4 \xC2\xB5s", Dimension::time) == Approx(4e-6));
  CHECK(parse_quantity("1 h", Dimension::time) == 3600.0);
  CHECK(parse_quantity("700 W", Dimension::power) == 700.0);
  CHECK(parse_quantity("120 /h", Dimension::rate) == Approx(120.0 / 3600.0));
  CHECK(parse_quantity("3 Hz", Dimension::rate) == 3.0);
}

TEST_CASE("bad quantities are rejected with what was expected and found", "[units]") {
  CHECK_THROWS_WITH(parse_quantity("80", Dimension::bytes), Catch::Contains("missing unit") && Catch::Contains("\"80\""));
  CHECK_THROWS_WITH(parse_quantity("80 GB/s", Dimension::bytes), Catch::Contains("unknown unit \"GB/s\""));
  CHECK_THROWS_WITH(parse_quantity("-1 GB", Dimension::bytes), Catch::Contains("negative"));
  CHECK_THROWS_WITH(parse_quantity("GB", Dimension::bytes), Catch::Contains("no number"));
  CHECK_THROWS_WITH(parse_quantity("1 TFLOP", Dimension::flop_rate), Catch::Contains("a compute rate"));
  CHECK_THROWS_AS(parse_quantity("inf s", Dimension::time), UnitError);
  CHECK_THROWS_WITH(parse_quantity("1e400 s", Dimension::time), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(parse_quantity("-0 GB", Dimension::bytes), Catch::Contains("negative"));
  CHECK_THROWS_AS(parse_quantity("", Dimension::time), UnitError);
}

TEST_CASE("formatting picks a readable prefix", "[units]") {
  CHECK(fleetsim::format_quantity(80e9, Dimension::bytes) == "80 GB");
  CHECK(fleetsim::format_quantity(3.35e12, Dimension::bandwidth) == "3.35 TB/s");
  CHECK(fleetsim::format_quantity(0.0125, Dimension::time) == "12.5 ms");
  CHECK(fleetsim::format_quantity(1800, Dimension::time) == "30 min");
  CHECK(fleetsim::format_quantity(989e12, Dimension::flop_rate) == "989 TFLOP/s");
}

TEST_CASE("plain numbers read without exponents and with thousands separators", "[units]") {
  CHECK(format_number(0) == "0");
  CHECK(format_number(0.25) == "0.25");
  CHECK(format_number(12.345) == "12.3");
  CHECK(format_number(998.4) == "998");
  CHECK(format_number(999.5) == "1,000");
  CHECK(format_number(20860) == "20,860");
  CHECK(format_number(10475496.98) == "10,475,497");
  CHECK(format_number(-1234567) == "-1,234,567");
  CHECK(format_number(1.234e-5) == "0.0000123");
  CHECK(format_number(2.82e5) == "282,000");
}

TEST_CASE("one number reader: finite numbers only, the whole text, for every file and option", "[units][input]") {
  using fleetsim::parse_number;
  CHECK(parse_number("82.2") == 82.2);
  CHECK(parse_number("-3") == -3.0);
  CHECK(parse_number("2.24e+06") == 2.24e6);
  for (const char* bad : {"", " 1", "1 ", "1x", "inf", "-inf", "INF", "nan", "NaN", "1e400", "-1e400", "0x10", "+"}) {
    INFO(bad);
    CHECK_FALSE(parse_number(bad).has_value());
  }
  CHECK_FALSE(parse_number(std::string(400, '9')).has_value());  // beyond a double's range, not an exception
}

TEST_CASE("did you mean: the one known name a few edits away, or nothing", "[input]") {
  const std::vector<std::string> nodes{"hgx-h100-8", "hgx-h200-8", "hgx-a100-8", "l40s-pcie-8"};
  CHECK(fleetsim::closest_name("hgx-h100-9", {"hgx-h100-8", "l40s-pcie-8"}) == "hgx-h100-8");
  CHECK(fleetsim::closest_name("HGX-H100-8", nodes) == "hgx-h100-8");  // names are case-sensitive: the right case is suggested
  CHECK(fleetsim::closest_name("hgx-h300-8", nodes).empty());  // as near to the H100 as to the H200: no guess
  CHECK(fleetsim::closest_name("tpd", {"tdp", "name", "vram"}) == "tdp");  // a swap of neighbours is one edit
  CHECK(fleetsim::closest_name("banana", nodes).empty());
  CHECK(fleetsim::did_you_mean("fifp", {"fifo", "sjf"}) == "; did you mean \"fifo\"?");
}
