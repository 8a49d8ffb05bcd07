#include "core/port.h"

#include <cctype>

#include "common/log.h"

namespace rpma {

bool port_ok(const char *port) noexcept {
    auto c = [](char ch) { return static_cast<unsigned char>(ch); };
    if (*port != '\0' && *port != '+' && *port != '-' && !std::isdigit(c(*port)) &&
        !std::isspace(c(*port)))
        return true;  // a service name
    unsigned long v = 0;
    const char *p = port;
    for (; *p && std::isdigit(c(*p)) && v <= 65535; ++p) v = v * 10 + (c(*p) - '0');
    if (p != port && *p == '\0' && v <= 65535) return true;
    RPMA_LOG_ERROR("port \"%s\" is not a number from 0 to 65535", port);
    return false;
}

}  // namespace rpma
