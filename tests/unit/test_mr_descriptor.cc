// MR descriptors (21 bytes, little-endian) and rpma_mr_remote_*.
#include <gtest/gtest.h>
#include <librpma.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/mr_descriptor.h"
#include "core/mr_remote.h"
#include "core/peer_cfg.h"
#include "fail_alloc.h"

namespace {

using rpma::decode_mr_descriptor;
using rpma::encode_mr_descriptor;
using rpma::kMrDescriptorSize;
using rpma::MrDescriptor;

// addr 0x0102030405060708, size 0x1112131415161718, rkey 0xa1b2c3d4, usage
// READ_SRC|WRITE_DST|PERSISTENT
const MrDescriptor kSample = {
    0x0102030405060708ull, 0x1112131415161718ull, 0xa1b2c3d4u,
    RPMA_MR_USAGE_READ_SRC | RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT};
const uint8_t kSampleBytes[21] = {
    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // addr, least significant byte first
    0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,  // size
    0xd4, 0xc3, 0xb2, 0xa1,                          // rkey
    0x29,                                            // usage: 0x01 | 0x08 | 0x20
};

std::vector<uint8_t> encoded(const MrDescriptor &d) {
    std::vector<uint8_t> out(kMrDescriptorSize + 4, 0xee);
    encode_mr_descriptor(d, out.data());
    return out;
}

TEST(MrDescriptor, SizeFitsPrivateDataWithPeerCfg) {
    EXPECT_EQ(kMrDescriptorSize, 21u);
    EXPECT_LE(kMrDescriptorSize + rpma::PeerCfg::kDescriptorSize, 24u);
}

TEST(MrDescriptor, EncodeMatchesHandBuiltBytes) {
    auto out = encoded(kSample);
    EXPECT_EQ(std::memcmp(out.data(), kSampleBytes, sizeof(kSampleBytes)), 0);
    for (size_t i = kMrDescriptorSize; i < out.size(); i++) EXPECT_EQ(out[i], 0xee) << i;
}

TEST(MrDescriptor, EncodeDoesNotNeedAlignment) {
    uint8_t buf[kMrDescriptorSize + 1];
    encode_mr_descriptor(kSample, buf + 1);
    EXPECT_EQ(std::memcmp(buf + 1, kSampleBytes, sizeof(kSampleBytes)), 0);
}

TEST(MrDescriptor, DecodeHandBuiltBytes) {
    MrDescriptor d{};
    ASSERT_EQ(decode_mr_descriptor(kSampleBytes, sizeof(kSampleBytes), &d), 0);
    EXPECT_EQ(d.addr, kSample.addr);
    EXPECT_EQ(d.size, kSample.size);
    EXPECT_EQ(d.rkey, kSample.rkey);
    EXPECT_EQ(d.usage, kSample.usage);
}

TEST(MrDescriptor, RoundTripExtremes) {
    const MrDescriptor cases[] = {
        {0, 1, 0, 1},
        {~0ull, ~0ull, ~0u, 0xff},
        {0x7fff12345678ull, 4096, 0x00000001u, RPMA_MR_USAGE_RECV},
        {0x8000000000000000ull, 0x100000000ull, 0x80000000u, RPMA_MR_USAGE_SEND},
    };
    for (const auto &c : cases) {
        auto bytes = encoded(c);
        MrDescriptor d{};
        ASSERT_EQ(decode_mr_descriptor(bytes.data(), kMrDescriptorSize, &d), 0);
        EXPECT_EQ(d.addr, c.addr);
        EXPECT_EQ(d.size, c.size);
        EXPECT_EQ(d.rkey, c.rkey);
        EXPECT_EQ(d.usage, c.usage);
    }
}

TEST(MrDescriptor, DecodeAcceptsLongerBuffer) {
    uint8_t buf[40];
    std::memset(buf, 0x77, sizeof(buf));
    std::memcpy(buf, kSampleBytes, sizeof(kSampleBytes));
    MrDescriptor d{};
    ASSERT_EQ(decode_mr_descriptor(buf, sizeof(buf), &d), 0);
    EXPECT_EQ(d.rkey, kSample.rkey);
}

TEST(MrDescriptor, DecodeInvalTooShortLeavesOutputAlone) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{20}}) {
        MrDescriptor d{1, 2, 3, 4};
        EXPECT_EQ(decode_mr_descriptor(kSampleBytes, n, &d), RPMA_E_INVAL) << n;
        EXPECT_EQ(d.addr, 1u);
        EXPECT_EQ(d.usage, 4u);
    }
}

TEST(MrDescriptor, DecodeInvalUsageZero) {
    uint8_t buf[21];
    std::memcpy(buf, kSampleBytes, sizeof(buf));
    buf[20] = 0;
    MrDescriptor d{1, 2, 3, 4};
    EXPECT_EQ(decode_mr_descriptor(buf, sizeof(buf), &d), RPMA_E_INVAL);
    EXPECT_EQ(d.rkey, 3u);
}

TEST(MrDescriptor, DecodeInvalNullPointers) {
    MrDescriptor d{};
    EXPECT_EQ(decode_mr_descriptor(nullptr, 21, &d), RPMA_E_INVAL);
    EXPECT_EQ(decode_mr_descriptor(kSampleBytes, 21, nullptr), RPMA_E_INVAL);
}

// ---- rpma_mr_remote_* ----

class MrRemoteDescriptor : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_EQ(rpma_mr_remote_from_descriptor(kSampleBytes, sizeof(kSampleBytes), &mr_), 0);
        ASSERT_NE(mr_, nullptr);
    }
    void TearDown() override { EXPECT_EQ(rpma_mr_remote_delete(&mr_), 0); }
    rpma_mr_remote *mr_ = nullptr;
};

TEST_F(MrRemoteDescriptor, FromDescriptorKeepsEveryField) {
    const auto *m = reinterpret_cast<const rpma::MrRemote *>(mr_);
    EXPECT_EQ(m->addr(), kSample.addr);
    EXPECT_EQ(m->size(), kSample.size);
    EXPECT_EQ(m->rkey(), kSample.rkey);
    EXPECT_EQ(m->usage(), kSample.usage);
}

TEST_F(MrRemoteDescriptor, GetSize) {
    size_t size = 0;
    ASSERT_EQ(rpma_mr_remote_get_size(mr_, &size), 0);
    EXPECT_EQ(size, static_cast<size_t>(kSample.size));
}

TEST_F(MrRemoteDescriptor, GetSizeInvalMrNull) {
    size_t size = 5;
    EXPECT_EQ(rpma_mr_remote_get_size(nullptr, &size), RPMA_E_INVAL);
    EXPECT_EQ(size, 5u);
}

TEST_F(MrRemoteDescriptor, GetSizeInvalSizeNull) {
    EXPECT_EQ(rpma_mr_remote_get_size(mr_, nullptr), RPMA_E_INVAL);
}

TEST_F(MrRemoteDescriptor, GetFlushType) {
    int ft = -1;
    ASSERT_EQ(rpma_mr_remote_get_flush_type(mr_, &ft), 0);
    EXPECT_EQ(ft, RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
}

TEST_F(MrRemoteDescriptor, GetFlushTypeInvalMrNull) {
    int ft = 77;
    EXPECT_EQ(rpma_mr_remote_get_flush_type(nullptr, &ft), RPMA_E_INVAL);
    EXPECT_EQ(ft, 77);
}

TEST_F(MrRemoteDescriptor, GetFlushTypeInvalFlushTypeNull) {
    EXPECT_EQ(rpma_mr_remote_get_flush_type(mr_, nullptr), RPMA_E_INVAL);
}

TEST(MrRemoteDescriptorFlushType, IsTheUsageFlushBits) {
    constexpr int kVis = RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;
    constexpr int kPers = RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT;
    const struct {
        uint8_t usage;
        int flush;
    } cases[] = {
        {RPMA_MR_USAGE_READ_SRC, 0},
        {RPMA_MR_USAGE_WRITE_DST | kVis, kVis},
        {kPers, kPers},
        {kVis | kPers, kVis | kPers},
        {0xff, kVis | kPers},
    };
    for (const auto &c : cases) {
        uint8_t bytes[kMrDescriptorSize];
        encode_mr_descriptor({0x1000, 64, 9, c.usage}, bytes);
        rpma_mr_remote *mr = nullptr;
        ASSERT_EQ(rpma_mr_remote_from_descriptor(bytes, sizeof(bytes), &mr), 0);
        int ft = -1;
        ASSERT_EQ(rpma_mr_remote_get_flush_type(mr, &ft), 0);
        EXPECT_EQ(ft, c.flush) << int(c.usage);
        EXPECT_EQ(reinterpret_cast<const rpma::MrRemote *>(mr)->flush_type(), c.flush);
        ASSERT_EQ(rpma_mr_remote_delete(&mr), 0);
    }
}

TEST(MrRemoteFromDescriptor, InvalDescNull) {
    auto *sentinel = reinterpret_cast<rpma_mr_remote *>(0x42);
    rpma_mr_remote *mr = sentinel;
    EXPECT_EQ(rpma_mr_remote_from_descriptor(nullptr, 21, &mr), RPMA_E_INVAL);
    EXPECT_EQ(mr, sentinel);
}

TEST(MrRemoteFromDescriptor, InvalMrPtrNull) {
    EXPECT_EQ(rpma_mr_remote_from_descriptor(kSampleBytes, 21, nullptr), RPMA_E_INVAL);
}

TEST(MrRemoteFromDescriptor, InvalIncompatibleSize) {
    auto *sentinel = reinterpret_cast<rpma_mr_remote *>(0x42);
    for (size_t n : {size_t{0}, size_t{8}, size_t{20}}) {
        rpma_mr_remote *mr = sentinel;
        EXPECT_EQ(rpma_mr_remote_from_descriptor(kSampleBytes, n, &mr), RPMA_E_INVAL) << n;
        EXPECT_EQ(mr, sentinel);
    }
}

TEST(MrRemoteFromDescriptor, InvalUsageZero) {
    uint8_t bytes[kMrDescriptorSize];
    encode_mr_descriptor({0x1000, 64, 9, 0}, bytes);
    auto *sentinel = reinterpret_cast<rpma_mr_remote *>(0x42);
    rpma_mr_remote *mr = sentinel;
    EXPECT_EQ(rpma_mr_remote_from_descriptor(bytes, sizeof(bytes), &mr), RPMA_E_INVAL);
    EXPECT_EQ(mr, sentinel);
}

TEST(MrRemoteFromDescriptor, NosuppEmptyRegion) {
    uint8_t bytes[kMrDescriptorSize];
    encode_mr_descriptor({0x1000, 0, 9, RPMA_MR_USAGE_READ_SRC}, bytes);
    auto *sentinel = reinterpret_cast<rpma_mr_remote *>(0x42);
    rpma_mr_remote *mr = sentinel;
    EXPECT_EQ(rpma_mr_remote_from_descriptor(bytes, sizeof(bytes), &mr), RPMA_E_NOSUPP);
    EXPECT_EQ(mr, sentinel);
}

TEST(MrRemoteFromDescriptor, NosuppRegionWrapsAddressSpace) {
    uint8_t bytes[kMrDescriptorSize];
    encode_mr_descriptor({~0ull - 10, 12, 9, RPMA_MR_USAGE_WRITE_DST}, bytes);
    auto *sentinel = reinterpret_cast<rpma_mr_remote *>(0x42);
    rpma_mr_remote *mr = sentinel;
    EXPECT_EQ(rpma_mr_remote_from_descriptor(bytes, sizeof(bytes), &mr), RPMA_E_NOSUPP);
    EXPECT_EQ(mr, sentinel);
    // A last byte at exactly 2^64 - 1 is still a valid range.
    encode_mr_descriptor({~0ull - 10, 11, 9, RPMA_MR_USAGE_WRITE_DST}, bytes);
    ASSERT_EQ(rpma_mr_remote_from_descriptor(bytes, sizeof(bytes), &mr), 0);
    ASSERT_EQ(rpma_mr_remote_delete(&mr), 0);
}

TEST(MrRemoteFromDescriptor, NomemLeavesMrPtrAlone) {
    auto *sentinel = reinterpret_cast<rpma_mr_remote *>(0x42);
    rpma_mr_remote *mr = sentinel;
    int ret;
    {
        rpma::test::FailAllocations fail;
        ret = rpma_mr_remote_from_descriptor(kSampleBytes, sizeof(kSampleBytes), &mr);
        EXPECT_GT(fail.refused(), 0);
    }
    EXPECT_EQ(ret, RPMA_E_NOMEM);
    EXPECT_EQ(mr, sentinel);
}

TEST(MrRemoteDescriptorDelete, SetsPointerToNull) {
    rpma_mr_remote *mr = nullptr;
    ASSERT_EQ(rpma_mr_remote_from_descriptor(kSampleBytes, sizeof(kSampleBytes), &mr), 0);
    EXPECT_EQ(rpma_mr_remote_delete(&mr), 0);
    EXPECT_EQ(mr, nullptr);
}

TEST(MrRemoteDescriptorDelete, NullObjectIsNoop) {
    rpma_mr_remote *mr = nullptr;
    EXPECT_EQ(rpma_mr_remote_delete(&mr), 0);
    EXPECT_EQ(mr, nullptr);
}

TEST(MrRemoteDescriptorDelete, InvalMrPtrNull) {
    EXPECT_EQ(rpma_mr_remote_delete(nullptr), RPMA_E_INVAL);
}

}  // namespace
