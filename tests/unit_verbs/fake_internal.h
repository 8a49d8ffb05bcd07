// What the wrappers share with fake.cc, beyond the tests' interface.
#pragma once

#include "fake.h"

namespace rpma::fake {

bool stack_present();
bool bind_no_device();
ibv_cq *take_fired();  // the next CQ fire() queued, or nullptr
void add_acked(unsigned n);

}  // namespace rpma::fake
