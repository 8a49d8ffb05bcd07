// port_ok (core/port.h): which port texts rpma_ep_listen and rpma_conn_req_new take (issue 19).
#include <gtest/gtest.h>

#include "core/port.h"

namespace rpma {
namespace {

TEST(Port, DecimalNumbersUpTo65535Pass) {
    for (const char *p : {"0", "1", "7204", "65535", "00080"}) EXPECT_TRUE(port_ok(p)) << p;
}

// getaddrinfo would keep the low 16 bits: "70000" is 4464, "65536" 0
TEST(Port, NumbersAbove65535AreRefused) {
    for (const char *p : {"65536", "70000", "4294967296", "99999999999999999999"})
        EXPECT_FALSE(port_ok(p)) << p;
}

// text strtoul would take whole, or a number with something after it
TEST(Port, NumericLookingTextIsRefused) {
    for (const char *p : {"", "-1", "+80", " 80", "\t80", "80 ", "0x50", "12ab", "1.5"})
        EXPECT_FALSE(port_ok(p)) << '"' << p << '"';
}

TEST(Port, ServiceNamesAreLeftToTheResolver) {
    for (const char *p : {"http", "rpma-service", "x1"}) EXPECT_TRUE(port_ok(p)) << p;
}

}  // namespace
}  // namespace rpma
