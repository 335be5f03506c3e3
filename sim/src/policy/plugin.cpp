// Policies from shared libraries (--policy-plugin): the library is opened, its one entry point
// asked for the policy's registry entry, and the entry registered like a built-in one.
#include <dlfcn.h>

#include "fleetsim/error.hpp"
#include "fleetsim/policy.hpp"

namespace fleetsim {

void load_policy_plugin(const std::string& path) {
  // RTLD_NODELETE keeps the code mapped for the life of the process: the registry holds its factory.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (library == nullptr) throw InputError({Problem{path, "", std::string("cannot load the policy plugin: ") + dlerror()}});
  using Entry = const PolicyInfo* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(library, "fleetsim_policy_plugin"));
  if (entry == nullptr) {
    throw InputError({Problem{path, "", "not a fleetsim policy plugin: no extern \"C\" fleetsim_policy_plugin()"}});
  }
  const PolicyInfo* info = entry();
  if (info == nullptr) throw InputError({Problem{path, "", "fleetsim_policy_plugin() returned no policy"}});
  register_policy(*info, path);
}

}  // namespace fleetsim
