// rpma_err_2str and rpma_utils_conn_event_2str: constant, distinct strings; never fail.
#include <gtest/gtest.h>
#include <librpma.h>

#include <climits>
#include <set>
#include <string>

namespace {

constexpr int kCodes[] = {RPMA_E_UNKNOWN,        RPMA_E_NOSUPP, RPMA_E_PROVIDER,
                          RPMA_E_NOMEM,          RPMA_E_INVAL,  RPMA_E_NO_COMPLETION,
                          RPMA_E_NO_EVENT,       RPMA_E_AGAIN,  RPMA_E_SHARED_CHANNEL,
                          RPMA_E_NOT_SHARED_CHNL};

TEST(Err2Str, EveryCodeHasItsOwnMessage) {
    std::set<std::string> seen;
    for (int code : kCodes) {
        const char *s = rpma_err_2str(code);
        ASSERT_NE(s, nullptr) << code;
        EXPECT_GT(std::string(s).size(), 3u) << code;
        EXPECT_TRUE(seen.insert(s).second) << "duplicate message for " << code << ": " << s;
        EXPECT_EQ(rpma_err_2str(code), s) << "not a constant string";
    }
    EXPECT_EQ(seen.size(), 10u);
}

TEST(Err2Str, MessagesSayWhatTheCodeMeans) {
    EXPECT_NE(std::string(rpma_err_2str(RPMA_E_INVAL)).find("nvalid"), std::string::npos);
    EXPECT_NE(std::string(rpma_err_2str(RPMA_E_NOMEM)).find("memory"), std::string::npos);
    EXPECT_NE(std::string(rpma_err_2str(RPMA_E_NOSUPP)).find("support"), std::string::npos);
    EXPECT_NE(std::string(rpma_err_2str(RPMA_E_AGAIN)).find("again"), std::string::npos);
}

TEST(Err2Str, AnyOtherValueGetsOneGenericMessage) {
    const char *generic = rpma_err_2str(-100010);
    ASSERT_NE(generic, nullptr);
    for (int code : kCodes) EXPECT_STRNE(generic, rpma_err_2str(code));
    for (int other : {-1, 1, -99999, -100011, -200000, INT_MIN, INT_MAX}) {
        EXPECT_STREQ(rpma_err_2str(other), generic) << other;
    }
}

TEST(Err2Str, ZeroIsSuccess) {
    const char *s = rpma_err_2str(0);
    ASSERT_NE(s, nullptr);
    for (int code : kCodes) EXPECT_STRNE(s, rpma_err_2str(code));
}

TEST(ErrorsConnEvent2Str, EveryEventHasItsOwnString) {
    const rpma_conn_event events[] = {RPMA_CONN_UNDEFINED, RPMA_CONN_ESTABLISHED,
                                      RPMA_CONN_CLOSED,    RPMA_CONN_LOST,
                                      RPMA_CONN_REJECTED,  RPMA_CONN_UNREACHABLE};
    std::set<std::string> seen;
    for (rpma_conn_event e : events) {
        const char *s = rpma_utils_conn_event_2str(e);
        ASSERT_NE(s, nullptr) << e;
        EXPECT_FALSE(std::string(s).empty());
        EXPECT_TRUE(seen.insert(s).second) << "duplicate string for " << e << ": " << s;
    }
    EXPECT_NE(std::string(rpma_utils_conn_event_2str(RPMA_CONN_ESTABLISHED)).find("stablished"),
              std::string::npos);
    EXPECT_NE(std::string(rpma_utils_conn_event_2str(RPMA_CONN_LOST)).find("lost"),
              std::string::npos);
}

TEST(ErrorsConnEvent2Str, OutOfRangeValuesAreUnknown) {
    const char *unknown = rpma_utils_conn_event_2str(static_cast<rpma_conn_event>(5));
    ASSERT_NE(unknown, nullptr);
    EXPECT_NE(std::string(unknown).find("nknown"), std::string::npos) << unknown;
    for (int e = -1; e <= 4; e++)
        EXPECT_STRNE(unknown, rpma_utils_conn_event_2str(static_cast<rpma_conn_event>(e)));
    for (int other : {-2, 6, 100, INT_MIN, INT_MAX})
        EXPECT_STREQ(rpma_utils_conn_event_2str(static_cast<rpma_conn_event>(other)), unknown);
}

}  // namespace
