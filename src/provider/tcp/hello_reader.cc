#include "provider/tcp/hello_reader.h"

#include <sys/socket.h>

#include <cerrno>

#include "common/log.h"

namespace rpma::tcp {

HelloReader::Step HelloReader::read(int fd) {
    if (got_ == sizeof(Hello)) return Step::kDone;
    char *dst = reinterpret_cast<char *>(&hello_) + got_;
    ssize_t r = ::recv(fd, dst, sizeof(Hello) - got_, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return Step::kMore;
    if (r <= 0) return Step::kBad;
    got_ += static_cast<size_t>(r);
    if (got_ < sizeof(Hello)) return Step::kMore;
    const Hello &h = hello_;
    if (h.magic != kMagic || h.version != kProtocolVersion || h.pdata_len > kConnectPdataMax ||
        (!main() && h.role != static_cast<uint8_t>(StreamRole::kJoin))) {
        RPMA_LOG_WARNING("malformed connection request; closing it");
        return Step::kBad;
    }
    return Step::kDone;
}

}  // namespace rpma::tcp
