// The one table of scheduling policies: name, one-line summary, reference, parameters, factory.
// Adding a policy means adding a row here; a duplicate name is caught by a test.
#include "fifo.hpp"

namespace fleetsim {

const std::vector<PolicyInfo>& policy_registry() {
  static const std::vector<PolicyInfo> registry{
      {"fifo",
       "first in, first out on the lowest-numbered free GPUs; the oldest ready task blocks the rest",
       "the baseline of every batch scheduler",
       {},
       [](const PolicyParams&) -> std::unique_ptr<Policy> { return std::make_unique<policies::Fifo>(); }},
  };
  return registry;
}

}  // namespace fleetsim
