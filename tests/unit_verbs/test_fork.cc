// A forked child and the parent's verbs objects: every call fails with RPMA_E_PROVIDER (logged)
// or does nothing, and destroying them in the child touches none of the parent's rdma-core
// objects. Each check runs in a child that exits with the verdict;
// alarm() bounds a child that would hang.
#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "provider/verbs/shared_recv_queue.h"
#include "qp_fixture.h"

namespace rpma::test {
namespace {

// True when thread tid sleeps in poll(2) or in a plain sleep (a sanitizer's background thread),
// as /proc says; false while it runs or makes another call.
bool asleep(const std::string &tid) {
    std::ifstream f("/proc/self/task/" + tid + "/syscall");
    long nr = -1;
    if (!(f >> nr)) return false;  // "running"
#ifdef SYS_poll
    if (nr == SYS_poll) return true;
#endif
    return nr == SYS_ppoll || nr == SYS_nanosleep || nr == SYS_clock_nanosleep;
}

// Returns once every other thread sleeps so, and the child finds no lock held by a thread it
// does not have: one just started may hold the sanitizer runtime's, one acknowledging an event
// the allocator's or the fakes'.
void wait_others_asleep() {
    const std::string self = std::to_string(::gettid());
    for (;;) {
        bool all = true;
        for (const auto &e : std::filesystem::directory_iterator("/proc/self/task")) {
            std::string tid = e.path().filename();
            if (tid != self && !asleep(tid)) all = false;
        }
        if (all) return;
        ::sched_yield();
    }
}

// Runs body in a child process; the child's exit status is 0 when body returned true.
int in_child(const std::function<bool()> &body) {
    wait_others_asleep();
    pid_t pid = ::fork();
    if (pid == 0) {
        ::alarm(20);
        ::_exit(body() ? 0 : 1);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

using ForkTest = QpTest;

TEST_F(ForkTest, ChildCallsFailAndLog) {
    ASSERT_EQ(create_active(), 0);
    std::unique_ptr<prov::SharedRecvQueue> srq;
    ASSERT_EQ(dom_->create_srq(4, &srq), 0);
    int status = in_child([&] {
        std::shared_ptr<prov::MemoryRegion> mr;
        char buf[64];
        std::unique_ptr<prov::CompletionChannel> ch;
        return dom_->register_memory(buf, sizeof(buf), RPMA_MR_USAGE_READ_SRC, &mr) ==
                   RPMA_E_PROVIDER &&
               dom_->create_channel(&ch) == RPMA_E_PROVIDER &&
               qp_->post_send(prov::SendWr{}) == RPMA_E_PROVIDER &&
               qp_->post_recv(prov::RecvWr{}) == RPMA_E_PROVIDER &&
               srq->post(prov::RecvWr{}) == RPMA_E_PROVIDER &&
               logged_error("belongs to the parent process") && fake::calls("ibv_reg_mr") == 1 &&
               fake::calls("ibv_post_send") == 0;
    });
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

TEST_F(ForkTest, ChildDestroysNothingOfTheParents) {
    ASSERT_EQ(create_active(), 0);
    std::unique_ptr<prov::SharedRecvQueue> srq;
    ASSERT_EQ(dom_->create_srq(4, &srq), 0);
    int status = in_child([&] {
        std::string before = fake::alive();
        qp_.reset();
        srq.reset();
        cq_.reset();
        ch_.reset();
        dom_.reset();
        return fake::alive() == before && fake::calls("rdma_destroy_id") == 0 &&
               fake::calls("rdma_destroy_event_channel") == 0 && fake::calls("ibv_dealloc_pd") == 0;
    });
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child status " << status
        << (WIFSIGNALED(status) ? " (killed by signal " + std::to_string(WTERMSIG(status)) + ")"
                                : "");
}

// The connection's events stay the parent's: a child that drops its copy leaves the channel.
TEST_F(ForkTest, ChildLeavesTheParentsEventsAlone) {
    ASSERT_EQ(create_active(), 0);
    rdma_cm_id *id = fake::last_cm_id();
    int status = in_child([&] {
        qp_.reset();
        dom_.reset();
        return fake::calls("rdma_destroy_event_channel") == 0;
    });
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    fake::deliver(id->channel, id, RDMA_CM_EVENT_ESTABLISHED);
    rpma_conn_event ev = RPMA_CONN_UNDEFINED;
    ASSERT_EQ(qp_->next_event(&ev), 0);
    EXPECT_EQ(ev, RPMA_CONN_ESTABLISHED);
}

}  // namespace
}  // namespace rpma::test
