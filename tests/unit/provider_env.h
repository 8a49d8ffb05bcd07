// RPMA_PROVIDER for one test (the library reads it at each listen and connection); nullptr:
// unset, which means auto. Unset again at the end: the unit tests share a process.
#pragma once

#include <cstdlib>

namespace rpma::test {

class ProviderEnv {
  public:
    explicit ProviderEnv(const char *value) {
        if (value)
            ::setenv("RPMA_PROVIDER", value, 1);
        else
            ::unsetenv("RPMA_PROVIDER");
    }
    ~ProviderEnv() { ::unsetenv("RPMA_PROVIDER"); }
    ProviderEnv(const ProviderEnv &) = delete;
    ProviderEnv &operator=(const ProviderEnv &) = delete;
};

}  // namespace rpma::test
