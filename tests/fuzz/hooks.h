// The fuzz targets' ways into the tcp provider's parsers (hooks.cc): the RC engine through the
// interface a transport uses, and the listener's Hello reader.
#pragma once

#include <librpma.h>

#include <cstddef>
#include <cstdint>

#include "common/fd_queue.h"

namespace rpma {
class Engine;
class MrTable;
class Cq;
}  // namespace rpma

namespace rpma::fuzz {

// Builds an established queue pair over in-memory streams, with no engine registration, feeds
// `data` as the peer's bytes on one stream and processes them on the calling thread. kind 0:
// the peer's requests (responder); 1: answers to our requests (completer, after a few posted
// requests); 2: the server's Reply to our connect (tcp's parser), then its frames. cq and events
// must outlive the engine.
void feed_frames(Engine *engine, MrTable *mrs, Cq *cq, FdQueue<rpma_conn_event> *events, int kind,
                 const uint8_t *data, size_t size);

// Feeds `data` as an accepted socket's first bytes to the listener's Hello reader
// (tcp::HelloReader) over a socket pair; 1 if it read a well-formed Hello.
int read_hello(const uint8_t *data, size_t size);

}  // namespace rpma::fuzz
