// One role's run state in the rebuilt RC engine (docs/rc-rebuild.md, section 2), after the
// kernel's rxe tasks: at most one thread runs a role at a time, a schedule that comes during a
// run is never lost (the runner passes again), and scheduling never waits, so no thread ever
// blocks on a role another thread is running.
#pragma once

#include <atomic>
#include <cstdint>

namespace rpma::rc {

class Task {
  public:
    enum class State : uint8_t {
        kIdle,      // nobody runs it
        kRunning,   // a runner is in a pass (or the run was handed on and not picked up yet)
        kArmed,     // as kRunning, and a schedule came since the pass began: pass again
        kStopping,  // stop() came during a run: the runner stops it after its pass
        kStopped,   // never runs again
    };

    // True when the task was idle: the caller now owns the run and passes until finish()
    // returns false. False when someone else runs it (it is armed: that runner passes again)
    // or it stopped.
    bool schedule() noexcept {
        State s = state_.load(std::memory_order_acquire);
        for (;;) {
            State next;
            switch (s) {
                case State::kIdle:
                    next = State::kRunning;
                    break;
                case State::kRunning:
                    next = State::kArmed;
                    break;
                default:  // armed already, stopping or stopped
                    return false;
            }
            if (state_.compare_exchange_weak(s, next, std::memory_order_acq_rel,
                                             std::memory_order_acquire))
                return next == State::kRunning;
        }
    }

    // The runner's pass ended. True: a schedule came during it, pass again. False: the task is
    // idle (or stopped) and the caller no longer owns it.
    bool finish() noexcept {
        State s = state_.load(std::memory_order_acquire);
        for (;;) {
            State next = s == State::kArmed     ? State::kRunning
                         : s == State::kRunning ? State::kIdle
                                                : State::kStopped;  // kStopping
            if (state_.compare_exchange_weak(s, next, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
                if (next != State::kRunning) state_.notify_all();  // wait_idle
                return next == State::kRunning;
            }
        }
    }

    // Owns the run if the task is idle, without arming a running one: for a caller that must
    // own it or do nothing (a poller), or that waits for its turn (wait_idle).
    bool try_own() noexcept {
        State s = State::kIdle;
        return state_.compare_exchange_strong(s, State::kRunning, std::memory_order_acq_rel,
                                              std::memory_order_acquire);
    }

    // Returns once nobody runs the task (idle or stopped). Only an application thread that
    // owns no other task may wait here (DriveTurn, where it has no descriptor to sleep on
    // beside its CQ); the engine never does.
    void wait_idle() const noexcept {
        for (State s = state(); s != State::kIdle && s != State::kStopped; s = state())
            state_.wait(s, std::memory_order_acquire);
    }

    // True when the task is stopped now. False: a runner owns it, and it stops when that pass
    // ends; no pass starts after it.
    bool stop() noexcept {
        State s = state_.load(std::memory_order_acquire);
        for (;;) {
            if (s == State::kStopped) return true;
            if (s == State::kStopping) return false;
            State next = s == State::kIdle ? State::kStopped : State::kStopping;
            if (state_.compare_exchange_weak(s, next, std::memory_order_acq_rel,
                                             std::memory_order_acquire))
                return next == State::kStopped;
        }
    }

    State state() const noexcept { return state_.load(std::memory_order_acquire); }

  private:
    std::atomic<State> state_{State::kIdle};
};

// Passes while the task stays scheduled. A pass returns false to hand the run on (its budget
// spent with input left): the task stays running and whoever it was handed to calls
// run_passes() for it.
template <class Pass>
void run_passes(Task &task, Pass &&pass) {
    do {
        if (!pass()) return;
    } while (task.finish());
}

// Schedules the task and, if this thread won the run, passes; true when it ran.
template <class Pass>
bool run_task(Task &task, Pass &&pass) {
    if (!task.schedule()) return false;
    run_passes(task, pass);
    return true;
}

}  // namespace rpma::rc
