#include "provider/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace rpma::shm {

namespace {
constexpr unsigned kRequiredSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::string errno_text(const char *what) {
    return std::string(what) + ": " + strerror(errno);
}
}  // namespace

Segment::~Segment() {
    if (base_) ::munmap(base_, len_);
}

bool Segment::create(uint32_t ring_size, std::string *why) {
    if (!valid_ring_size(ring_size)) {
        *why = "bad ring size";
        return false;
    }
    fd_.reset(::memfd_create("rpma-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd_.valid()) {
        *why = errno_text("memfd_create");
        return false;
    }
    len_ = bytes_for(ring_size);
    if (::ftruncate(fd_.get(), static_cast<off_t>(len_)) != 0) {
        *why = errno_text("ftruncate");
        return false;
    }
    if (::fcntl(fd_.get(), F_ADD_SEALS, kRequiredSeals) != 0) {
        *why = errno_text("sealing the memfd");
        return false;
    }
    ring_size_ = ring_size;
    if (!map(why)) return false;
    // A fresh memfd reads as zeros: every index starts at 0. Both sides start asleep, as
    // nobody has looked at an empty ring yet: the first bytes ring the doorbell.
    for (int i = 0; i < 4; ++i) ring(static_cast<RingId>(i)).ctl->sleeping.store(1);
    return true;
}

bool Segment::attach(Fd fd, uint32_t ring_size, std::string *why) {
    fd_ = std::move(fd);
    if (!valid_ring_size(ring_size)) {
        *why = "the peer asked for a bad ring size";
        return false;
    }
    int seals = ::fcntl(fd_.get(), F_GET_SEALS);
    if (seals < 0 || (static_cast<unsigned>(seals) & kRequiredSeals) != kRequiredSeals) {
        *why = "the peer's shared memory is not sealed against resizing";
        return false;
    }
    struct stat st {};
    len_ = bytes_for(ring_size);
    if (::fstat(fd_.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<size_t>(st.st_size) != len_) {
        *why = "the peer's shared memory has the wrong size";
        return false;
    }
    ring_size_ = ring_size;
    if (!map(why)) return false;
    close_fd();
    return true;
}

bool Segment::map(std::string *why) {
    void *p = ::mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (p == MAP_FAILED) {
        *why = errno_text("mmap");
        return false;
    }
    base_ = p;
    return true;
}

RingView Segment::ring(RingId id) const noexcept {
    char *at = static_cast<char *>(base_) +
               static_cast<size_t>(id) * (kCtlSpace + static_cast<size_t>(ring_size_));
    return RingView{reinterpret_cast<RingCtl *>(at), at + kCtlSpace, ring_size_};
}

}  // namespace rpma::shm
