// The one parser of physical quantities in input files ("900 GB/s", "80 GiB", "989 TFLOP/s",
// "2.5 ms", "400 Gb/s", "700 W", "0.5 /s") and the matching human-readable formatting.
// Everything inside fleetsim is SI base units in doubles: seconds, bytes, FLOP, bytes/s, FLOP/s, W.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fleetsim {

enum class Dimension {
  bytes,      // B, kB, MB, GB, TB, PB (SI); KiB, MiB, GiB, TiB, PiB; bits: b, kb, Mb, Gb, Tb
  bandwidth,  // any bytes or bits unit followed by /s: "450 GB/s", "400 Gb/s"
  flop,       // FLOP with an SI prefix: "1.2 TFLOP"
  flop_rate,  // FLOP/s or FLOPS with an SI prefix: "989 TFLOP/s", "67 TFLOPS"
  time,       // ns, us, µs, ms, s, min, h, d
  power,      // W, kW, MW
  rate,       // events per time: "/s", "/min", "/h", "Hz"
};

// What a quantity of this dimension looks like, for error messages: "a size such as \"80 GiB\"".
std::string_view dimension_example(Dimension dim);

// Thrown when text is not a valid, finite, non-negative quantity of the wanted dimension.
// The message says what was expected and what was found; loaders add the file and field.
class UnitError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The one reader of a bare number, for every file, log and option: the whole text as a finite number in
// any standard form ("82.2", "-3", "2.24e+06"), or nothing for anything else: empty text, characters
// after the number, "inf", "nan", or a value beyond a double's range ("1e400"). Callers check the
// range they need.
std::optional<double> parse_number(std::string_view text);

// Parses "<number> <unit>" (space optional). A bare number is not accepted: units in files are explicit.
double parse_quantity(std::string_view text, Dimension dim);

// Short human form with three significant digits: "80 GB", "3.35 TB/s", "12.5 ms", "989 TFLOP/s".
std::string format_quantity(double value, Dimension dim);

// A plain number for people: three significant digits below 1,000 ("0.0123", "12.5", "998"), a whole
// number with thousands separators from there ("1,234", "10,475,497"); never an exponent.
std::string format_number(double value);

// The longest time an input may give in seconds (a trace's times and durations, policies' seconds): 1e9 s,
// some 32 years. Past it a number is a broken cell or a typo, and sums of such times lose every digit.
inline constexpr double kLongestSeconds = 1e9;

}  // namespace fleetsim
