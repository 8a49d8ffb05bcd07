// What the queue pair tests share: a domain on the fake device, a CQ on its channel, the
// connection's event queue, and the queue pair (closed before the fixture checks for leaks).
#pragma once

#include "common/fd_queue.h"
#include "provider/verbs/connect_request.h"
#include "provider/verbs/domain.h"
#include "provider/verbs/queue_pair.h"
#include "verbs_test.h"

namespace rpma::test {

class QpTest : public VerbsTest {
  protected:
    void SetUp() override {
        VerbsTest::SetUp();
        ASSERT_EQ(verbs::Domain::create(fake::context(), &dom_), 0);
        ASSERT_EQ(dom_->create_channel(&ch_), 0);
        ASSERT_EQ(dom_->create_cq(ch_.get(), false, 8, &cq_), 0);
        attr_.sq_size = 4;
        attr_.rq_size = 4;
        attr_.cq = cq_.get();
        attr_.recv_cq = cq_.get();
        attr_.events = &events_;
    }
    void TearDown() override {
        qp_.reset();
        cq_.reset();
        ch_.reset();
        dom_.reset();
        VerbsTest::TearDown();
    }
    int create_active() { return dom_->create_qp("192.0.2.1", "7204", attr_, &qp_); }
    verbs::QueuePair &qp() { return static_cast<verbs::QueuePair &>(*qp_); }

    std::unique_ptr<verbs::Domain> dom_;
    std::unique_ptr<prov::CompletionChannel> ch_;
    std::unique_ptr<prov::CompletionQueue> cq_;
    FdQueue<rpma_conn_event> events_;
    prov::QpAttr attr_;
    std::shared_ptr<prov::QueuePair> qp_;
};

}  // namespace rpma::test
