// Allocation failure injection for NOMEM tests: tests/unit/fail_alloc.cc replaces the global
// operator new/delete of the unit-test binary. Only the thread that holds a FailAllocations
// object sees failures, so other threads (and other tests) are unaffected.
#pragma once

namespace rpma::test {

class FailAllocations {
  public:
    FailAllocations() noexcept;
    ~FailAllocations();
    FailAllocations(const FailAllocations &) = delete;
    FailAllocations &operator=(const FailAllocations &) = delete;

    // How many allocations were refused while this object was alive.
    int refused() const noexcept;
};

}  // namespace rpma::test
