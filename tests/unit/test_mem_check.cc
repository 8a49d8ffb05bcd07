// MemCheck: the /proc/self/maps walk behind rpma_mr_reg's validation.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/mem_check.h"

using rpma::MemCheck;
using Fault = MemCheck::Fault;

namespace {

constexpr const char *kMaps =
    "1000-3000 rw-p 00000000 00:00 0 \n"
    "3000-4000 r--p 00000000 00:00 0                  [some file]\n"
    "4000-5000 ---p 00000000 00:00 0 \n"
    "6000-7000 rw-s 00000000 00:05 12                 /dev/zero (deleted)\n"
    "7000-8000 rw-p 00000000 00:00 0 \n";

Fault fault(uintptr_t addr, size_t len, bool write, const char *maps = kMaps) {
    return MemCheck::check_maps(maps, addr, len, write).fault;
}

}  // namespace

TEST(MemCheck, MergesAdjacentMappings) {
    EXPECT_EQ(fault(0x1000, 0x3000, false), Fault::kNone);
    EXPECT_EQ(fault(0x6000, 0x2000, true), Fault::kNone);
    EXPECT_EQ(fault(0x2fff, 2, false), Fault::kNone);
}

TEST(MemCheck, Protection) {
    EXPECT_EQ(fault(0x1000, 0x2000, true), Fault::kNone);
    EXPECT_EQ(fault(0x1000, 0x2001, true), Fault::kNotWritable);
    EXPECT_EQ(MemCheck::check_maps(kMaps, 0x2000, 0x2000, true).at, 0x3000u);
    EXPECT_EQ(fault(0x3000, 0x1001, false), Fault::kNotReadable);
    EXPECT_EQ(fault(0x4800, 1, false), Fault::kNotReadable);
}

// As get_user_pages checks a VMA: a registration that may be written needs VM_WRITE only (a
// PROT_WRITE-only mapping registers), one never written needs VM_READ.
TEST(MemCheck, WriteOnlyMappings) {
    const char *maps =
        "1000-2000 -w-p 0 0 0\n"
        "2000-3000 rw-p 0 0 0\n"
        "3000-4000 ---p 0 0 0\n";
    EXPECT_EQ(fault(0x1000, 0x2000, true, maps), Fault::kNone);
    EXPECT_EQ(fault(0x1000, 0x1000, false, maps), Fault::kNotReadable);
    EXPECT_EQ(fault(0x2000, 0x1000, false, maps), Fault::kNone);
    EXPECT_EQ(fault(0x3000, 1, true, maps), Fault::kNotReadable);  // PROT_NONE: neither
    EXPECT_EQ(fault(0x3000, 1, false, maps), Fault::kNotReadable);
}

TEST(MemCheck, Holes) {
    EXPECT_EQ(fault(0x0, 0x1000, false), Fault::kUnmapped);
    EXPECT_EQ(fault(0x800, 0x1000, false), Fault::kUnmapped);
    EXPECT_EQ(fault(0x5000, 1, false), Fault::kUnmapped);
    auto r = MemCheck::check_maps(kMaps, 0x7000, 0x1001, false);
    EXPECT_EQ(r.fault, Fault::kUnmapped);
    EXPECT_EQ(r.at, 0x8000u);
    // the first fault is the one reported
    EXPECT_EQ(fault(0x1000, 0x7000, false), Fault::kNotReadable);
    EXPECT_EQ(fault(0x5fff, 2, false), Fault::kUnmapped);
    EXPECT_EQ(fault(UINTPTR_MAX - 10, 100, false), Fault::kUnmapped);  // wraps
}

TEST(MemCheck, ToleratesRepeatedAndMalformedLines) {
    // a concurrent change can repeat or reorder lines between two reads of the file
    const char *maps =
        "1000-2000 rw-p 0 0 0\n"
        "garbage\n"
        "1000-2000 rw-p 0 0 0\n"
        "1800-3000 rw-p 0 0 0\n"
        "2000-1000 rw-p 0 0 0\n"
        "3000-4000 rw-p";
    EXPECT_EQ(fault(0x1000, 0x3000, true, maps), Fault::kNone);
    EXPECT_EQ(fault(0x1000, 0x3001, true, maps), Fault::kUnmapped);
    EXPECT_EQ(fault(0x1000, 1, false, ""), Fault::kUnmapped);
}

TEST(MemCheck, ThisProcess) {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void *p = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    char *c = static_cast<char *>(p);
    EXPECT_EQ(MemCheck::check(c, 3 * page, true).fault, Fault::kNone);
    ASSERT_EQ(mprotect(c + page, page, PROT_READ), 0);
    EXPECT_EQ(MemCheck::check(c, 3 * page, false).fault, Fault::kNone);
    auto r = MemCheck::check(c, 3 * page, true);
    EXPECT_EQ(r.fault, Fault::kNotWritable);
    EXPECT_EQ(r.at, reinterpret_cast<uintptr_t>(c + page));
    ASSERT_EQ(munmap(c + 2 * page, page), 0);
    EXPECT_EQ(MemCheck::check(c + page, 2 * page, false).fault, Fault::kUnmapped);
    munmap(c, 2 * page);
    p = mmap(nullptr, page, PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    EXPECT_EQ(MemCheck::check(p, page, true).fault, Fault::kNone);
    EXPECT_EQ(MemCheck::check(p, page, false).fault, Fault::kNotReadable);
    munmap(p, page);
}
