// Whether the calling thread can be cancelled now (its cancelability state), for tests that check
// a wait takes what it took with cancellation off.
#pragma once

#include <pthread.h>

namespace rpma::test {

inline bool cancellation_on() {
    int state = PTHREAD_CANCEL_DISABLE;
    ::pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
    ::pthread_setcancelstate(state, nullptr);
    return state == PTHREAD_CANCEL_ENABLE;
}

}  // namespace rpma::test
