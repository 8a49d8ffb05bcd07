#include "fail_alloc.h"

#include <cstdlib>
#include <new>

namespace {

// Constant-initialised thread locals: safe to touch from operator new at any time.
thread_local bool t_failing = false;
thread_local int t_refused = 0;

void *allocate(std::size_t n) noexcept {
    if (t_failing) {
        t_refused++;
        return nullptr;
    }
    return std::malloc(n ? n : 1);
}

}  // namespace

namespace rpma::test {

FailAllocations::FailAllocations() noexcept {
    t_refused = 0;
    t_failing = true;
}
FailAllocations::~FailAllocations() {
    t_failing = false;
}
int FailAllocations::refused() const noexcept {
    return t_refused;
}

}  // namespace rpma::test

// Every form pairs malloc with free, so sanitizers see matching calls.
void *operator new(std::size_t n) {
    if (void *p = allocate(n)) return p;
    throw std::bad_alloc();
}
void *operator new[](std::size_t n) {
    if (void *p = allocate(n)) return p;
    throw std::bad_alloc();
}
void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
    return allocate(n);
}
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept {
    return allocate(n);
}
void operator delete(void *p) noexcept {
    std::free(p);
}
void operator delete[](void *p) noexcept {
    std::free(p);
}
void operator delete(void *p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void *p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void *p, const std::nothrow_t &) noexcept {
    std::free(p);
}
void operator delete[](void *p, const std::nothrow_t &) noexcept {
    std::free(p);
}
