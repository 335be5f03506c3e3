#include "measure.hpp"

#include <algorithm>
#include <ctime>

namespace fleetsim::measure {

double median_of(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
  return values[values.size() / 2];
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

Points points_of(const std::vector<Measurement>& measurements, std::string_view kernel, Dtype dtype) {
  Points p;
  for (const Measurement& m : measurements) {
    if (m.kernel == kernel && m.dtype == dtype) {
      p.sizes.push_back(m.size);
      p.seconds.push_back(m.seconds);
    }
  }
  return p;
}

}  // namespace fleetsim::measure
