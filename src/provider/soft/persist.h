// Making a range of a registered region durable, for FLUSH PERSISTENT.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rpma {

// msync(MS_SYNC) over the pages of [addr, addr + len): writes a file-backed mapping back to its
// file, and on a DAX/MAP_SYNC mapping the kernel writes the CPU caches back. 0 or -1 (errno).
int persist_range(char *addr, size_t len) noexcept;

// What persist_range did, so tests can show a flush reaches exactly the flushed pages. A
// snapshot is consistent while no other flush runs (the fields are read one by one).
struct PersistStats {
    uint64_t calls;
    uint64_t bytes;  // page-rounded bytes synced
    uintptr_t last_begin, last_end;
};
PersistStats persist_stats() noexcept;

}  // namespace rpma
