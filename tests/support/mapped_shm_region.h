// MappedRegion: the shared-memory region of an endpoint, mapped writable by someone other
// than its owner, as another process of the same user could map it, so that tests and
// fuzz targets can corrupt what the region shares. No test framework here: the fuzz
// targets use it too.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "transport/datapath/net_addr.h"
#include "transport/datapath/shm/shm_layout.h"

namespace spray::test {

struct MappedRegion {
  dp::shm::RegionLayout layout{};  // as the owner wrote it when it created the region
  uint8_t* base = nullptr;         // nullptr: no such region, or it could not be mapped

  explicit MappedRegion(const dp::NetAddr& addr) {
    const int fd = ::shm_open(dp::shm::region_name(addr).c_str(), O_RDWR, 0);
    if (fd < 0) return;
    dp::shm::RegionHeader header_copy;
    if (::pread(fd, &header_copy, sizeof(header_copy), 0) !=
        static_cast<ssize_t>(sizeof(header_copy))) {
      ::close(fd);
      return;
    }
    layout = header_copy.layout;
    void* p = ::mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p != MAP_FAILED) base = static_cast<uint8_t*>(p);
  }
  ~MappedRegion() {
    if (base) ::munmap(base, layout.total_bytes);
  }
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
};

}  // namespace spray::test
