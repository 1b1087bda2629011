// ShmDatapath setup: the doorbell socket, creating this endpoint's region, mapping
// peers' regions, claiming inbox slots, and noticing peers that died.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "transport/datapath/shm/shm_datapath.h"
#include "transport/datapath/udp/socket_address.h"

namespace spray::dp {
namespace shm {

RegionLayout RegionLayout::of(uint32_t mtu_bytes, uint32_t buffer_count, uint32_t inbox_slots,
                              uint32_t ring_entries) {
  const auto round64 = [](uint64_t n) { return (n + 63) & ~uint64_t{63}; };
  RegionLayout l;
  l.mtu_bytes = mtu_bytes;
  l.buffer_count = buffer_count;
  l.buffer_stride = static_cast<uint32_t>(round64(mtu_bytes));
  l.inbox_slots = inbox_slots;
  l.ring_entries = ring_entries;
  l.slot_stride = round64(sizeof(SlotControl) + uint64_t{ring_entries} * sizeof(Descriptor));
  l.slots_offset = round64(sizeof(RegionHeader));
  l.lent_offset = l.slots_offset + l.slot_stride * inbox_slots;
  // Buffers start on a page of their own, away from the control words.
  l.buffers_offset = (l.lent_offset + uint64_t{buffer_count} * 4 + 4095) & ~uint64_t{4095};
  l.total_bytes = l.buffers_offset + uint64_t{l.buffer_stride} * buffer_count;
  return l;
}

bool RegionLayout::fits(uint64_t file_bytes) const {
  const RegionLayout expected = of(mtu_bytes, buffer_count, inbox_slots, ring_entries);
  return mtu_bytes > 0 && mtu_bytes <= (1u << 20) && buffer_count > 0 &&
         buffer_count <= (1u << 20) && inbox_slots > 0 && inbox_slots <= 4096 &&
         ring_entries >= 2 && ring_entries <= (1u << 16) &&
         (ring_entries & (ring_entries - 1)) == 0 && expected.buffer_stride == buffer_stride &&
         expected.slot_stride == slot_stride && expected.slots_offset == slots_offset &&
         expected.lent_offset == lent_offset && expected.buffers_offset == buffers_offset &&
         expected.total_bytes == total_bytes && total_bytes <= file_bytes;
}

std::string region_name(const NetAddr& addr) {
  const size_t bytes = addr.family == NetAddr::Family::kIpv6 ? 16 : 4;
  std::string hex;
  for (size_t i = 0; i < bytes; ++i) hex += fmt::format("{:02x}", addr.ip[i]);
  return fmt::format("/spray-shm-{}-{}", hex, addr.port);
}

}  // namespace shm

namespace {

// One access to every page of the first `buffers` buffers of a region laid out as
// `layout` at `base` (see ShmDatapath::kTouchedBuffers for why): a write of zero when
// `write` (only into a region nobody uses yet), else a read.
void touch_buffer_pages(uint8_t* base, const shm::RegionLayout& layout, size_t buffers,
                        bool write) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t end = layout.buffers_offset + uint64_t{layout.buffer_stride} *
                                                   std::min<uint64_t>(buffers, layout.buffer_count);
  for (uint64_t offset = layout.buffers_offset; offset < end; offset += page) {
    volatile uint8_t* byte = base + offset;
    if (write) {
      *byte = 0;
    } else {
      (void)*byte;
    }
  }
}

// The doorbell socket, bound to `addr` (port 0 picks one). -1 and `error` on failure.
int open_doorbell(const NetAddr& addr, const std::string& text, std::string& error) {
  const int family = addr.family == NetAddr::Family::kIpv6 ? AF_INET6 : AF_INET;
  const int fd = ::socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = fmt::format("socket(): {}", std::strerror(errno));
    return -1;
  }
  sockaddr_storage sa;
  const socklen_t len = to_sockaddr(addr, sa);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    error = explain_bind_error(errno, addr, text);
    ::close(fd);
    return -1;
  }
  return fd;
}

// Creates the region file `name` of `bytes` and maps it. nullptr and `error` on failure.
uint8_t* create_region(const std::string& name, uint64_t bytes, std::string& error) {
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    // We hold the UDP port the name is made of, so whoever made this file is gone.
    ::shm_unlink(name.c_str());
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  }
  if (fd < 0) {
    error = fmt::format("shm_open({}): {}", name, std::strerror(errno));
    return nullptr;
  }
  // Reserve every page now: a tmpfs that fills up later would kill us with SIGBUS on a
  // write to a page it cannot supply; now it is a clear error instead.
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    error = fmt::format("cannot reserve {} bytes for {} in /dev/shm: {}", bytes, name,
                        std::strerror(err));
    ::close(fd);
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  // MAP_POPULATE: the pages exist (above), and mapping them all now did not lengthen a
  // 4-rank spray-coll-perf run (0.45-0.53 s either way), where leaving it to first use
  // put a page fault on many early packets (with peers' regions populated too, a 4-rank
  // 4 KiB all-reduce's first 50 calls took 39-55 us each, against 94-111).
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    error = fmt::format("mmap({}, {} bytes): {}", name, bytes, std::strerror(errno));
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  return static_cast<uint8_t*>(p);
}

// Regions whose owner died without closing (a crash, a kill) stay in /dev/shm until
// removed; each endpoint that opens removes those whose owner no longer exists.
void remove_stale_regions() {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return;
  while (const dirent* e = ::readdir(dir)) {
    if (std::strncmp(e->d_name, "spray-shm-", 10) != 0) continue;
    const std::string name = std::string("/") + e->d_name;
    const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) continue;
    struct stat st {};
    void* p = MAP_FAILED;
    if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= sizeof(shm::RegionHeader))
      p = ::mmap(nullptr, sizeof(shm::RegionHeader), PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) continue;
    const auto* h = static_cast<const shm::RegionHeader*>(p);
    // A region being created has no magic yet: leave it.
    const bool stale = h->magic.load(std::memory_order_acquire) == shm::kMagic &&
                       h->owner_pid > 0 && ::kill(h->owner_pid, 0) != 0 && errno == ESRCH;
    ::munmap(p, sizeof(shm::RegionHeader));
    if (stale) ::shm_unlink(name.c_str());
  }
  ::closedir(dir);
}

}  // namespace

std::unique_ptr<ShmDatapath> ShmDatapath::open(const ShmConfig& c, std::string& error) {
  const auto addr = parse_ip(c.address, c.port);
  if (!addr) {
    error = fmt::format("'{}' is not an IPv4 or IPv6 address", c.address);
    return nullptr;
  }
  if (c.mtu_bytes < 256 || c.buffers == 0 || c.inbox_slots == 0 || c.rx_views == 0 ||
      c.ring_entries < 2 || (c.ring_entries & (c.ring_entries - 1)) != 0) {
    error = "shm: mtu >= 256, buffers, inbox slots and views > 0, ring entries a power of two";
    return nullptr;
  }
  const shm::RegionLayout layout =
      shm::RegionLayout::of(c.mtu_bytes, c.buffers, c.inbox_slots, c.ring_entries);
  if (!layout.fits(layout.total_bytes)) {
    error = "shm: region geometry out of range";
    return nullptr;
  }
  const bool owns_socket = c.shared_socket < 0;
  const int fd = owns_socket ? open_doorbell(*addr, c.address, error) : c.shared_socket;
  if (fd < 0) return nullptr;
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const NetAddr local = from_sockaddr(bound);
  remove_stale_regions();
  const std::string name = shm::region_name(local);
  uint8_t* base = create_region(name, layout.total_bytes, error);
  if (base == nullptr) {
    if (owns_socket) ::close(fd);
    return nullptr;
  }
  auto datapath = std::unique_ptr<ShmDatapath>(
      new ShmDatapath(layout, local, fd, owns_socket, base, name, c.rx_views));
  datapath->short_distance_reads_ = c.short_distance_reads;
  return datapath;
}

ShmDatapath::ShmDatapath(const shm::RegionLayout& layout, NetAddr local, int socket,
                         bool owns_socket, uint8_t* base, std::string name, uint32_t rx_views)
    : layout_(layout),
      local_(local),
      socket_(socket),
      owns_socket_(owns_socket),
      base_(base),
      header_(shm::header_of(base)),
      name_(std::move(name)),
      tx_bufs_(layout.buffer_count),
      lent_to_(layout.buffer_count),
      rx_views_(rx_views),
      rx_lent_flag_(rx_views),
      rx_region_(rx_views),
      inbound_(layout.inbox_slots) {
  // A fresh file is zero: every slot free, every buffer home, nobody asleep.
  header_->version = shm::kVersion;
  header_->owner_pid = static_cast<int32_t>(::getpid());
  header_->owner = local_;
  header_->layout = layout_;
  touch_buffer_pages(base_, layout_, kTouchedBuffers, /*write=*/true);
  header_->magic.store(shm::kMagic, std::memory_order_release);

  tx_free_.reserve(layout.buffer_count);
  lent_.reserve(layout.buffer_count);
  for (uint32_t i = layout.buffer_count; i-- > 0;) {
    tx_bufs_[i].data = layout_.buffer(base_, i);
    tx_bufs_[i].capacity = layout_.mtu_bytes;
    tx_bufs_[i].owner_tag = i;
    tx_free_.push_back(i);
  }
  rx_free_.reserve(rx_views);
  for (uint32_t i = rx_views; i-- > 0;) {
    rx_views_[i].owner_tag = kViewTag | i;
    rx_free_.push_back(i);
  }
  touched_.reserve(64);
}

ShmDatapath::~ShmDatapath() {
  // Senders still mapping the region keep its memory until they unmap; the name goes now.
  ::shm_unlink(name_.c_str());
  // Rendezvous sends still live are abandoned with the endpoint, their buffers the
  // application's again: no copy a peer finishes from now on may count.
  for (std::atomic<uint64_t>& key : header_->readable_keys) key.store(0, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_release);
  ::munmap(base_, layout_.total_bytes);
  for (uint32_t i = 0; i < regions_.size(); ++i) unmap_region(i);
  if (owns_socket_) ::close(socket_);
}

bool ShmDatapath::process_is_alive(int32_t pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

namespace {

// The region file of the endpoint at `addr`, opened (-1 if none) with its size (at least a
// header's).
int open_region_file(const NetAddr& addr, int flags, uint64_t& file_bytes) {
  const std::string name = shm::region_name(addr);
  const int fd = ::shm_open(name.c_str(), flags | O_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < sizeof(shm::RegionHeader)) {
    ::close(fd);
    return -1;
  }
  file_bytes = static_cast<uint64_t>(st.st_size);
  return fd;
}

// Whether `addr` is an endpoint's name in the one form an endpoint gives itself: an IPv4
// or IPv6 address and a port, every other byte zero. A region's name reads only the
// address and port, so a sender whose slot claims a form with other bytes set (fuzz_shm
// found it) would reach a real region under a name that compares unequal to its owner's,
// and its packets would seem to come from another peer.
bool is_endpoint_name(const NetAddr& addr) {
  if (addr.qpn != 0) return false;
  if (addr.family == NetAddr::Family::kIpv6) return true;
  if (addr.family != NetAddr::Family::kIpv4) return false;
  return std::all_of(addr.ip.begin() + 4, addr.ip.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

bool ShmDatapath::is_live_region_of(const shm::RegionHeader* h, const NetAddr& addr,
                                    uint64_t file_bytes) {
  return h->magic.load(std::memory_order_acquire) == shm::kMagic && h->version == shm::kVersion &&
         h->layout.fits(file_bytes) && h->owner == addr && process_is_alive(h->owner_pid);
}

bool ShmDatapath::has_live_region(const NetAddr& peer) {
  if (not_local_.count(peer) != 0) return false;
  const auto known = region_by_addr_.find(peer);
  if (known != region_by_addr_.end() && !regions_[static_cast<size_t>(known->second)].gone)
    return true;
  // Only its header is looked at, read-only: the whole region is mapped on the first send.
  uint64_t file_bytes = 0;
  const int fd = open_region_file(peer, O_RDONLY, file_bytes);
  if (fd < 0) return false;
  void* p = ::mmap(nullptr, sizeof(shm::RegionHeader), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return false;
  const bool live = is_live_region_of(static_cast<const shm::RegionHeader*>(p), peer, file_bytes);
  ::munmap(p, sizeof(shm::RegionHeader));
  return live;
}

int32_t ShmDatapath::map_peer(const NetAddr& addr) {
  if (!is_endpoint_name(addr)) return -1;
  const auto known = region_by_addr_.find(addr);
  if (known != region_by_addr_.end() && !regions_[static_cast<size_t>(known->second)].gone)
    return known->second;
  // Not mapped yet, or its owner died and it may have come back with a new region.
  uint64_t file_bytes = 0;
  const int fd = open_region_file(addr, O_RDWR, file_bytes);
  if (fd < 0) return -1;
  void* p = ::mmap(nullptr, file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return -1;
  auto* base = static_cast<uint8_t*>(p);
  const shm::RegionHeader* h = shm::header_of(base);
  PeerRegion r;
  r.addr = addr;
  r.base = base;
  r.layout = h->layout;
  r.pid = h->owner_pid;
  // The copy is what we use, so the copy is what must fit: the peer may rewrite its header.
  if (!is_live_region_of(h, addr, file_bytes) || !r.layout.fits(file_bytes)) {
    ::munmap(base, file_bytes);
    return -1;
  }
  r.layout.total_bytes = file_bytes;  // what munmap must release
  // Mapped all at once now that it proved to be a live peer's region, as our own is
  // (see create_region); its owner reserved every page, so this allocates nothing.
  // Best effort: a kernel before 5.14 maps them on first use instead.
  (void)::madvise(base, file_bytes, MADV_POPULATE_WRITE);
  touch_buffer_pages(base, r.layout, kTouchedBuffers, /*write=*/false);
  const auto index = static_cast<int32_t>(regions_.size());
  regions_.push_back(r);
  region_views_.push_back(0);
  region_by_addr_[addr] = index;
  return index;
}

int32_t ShmDatapath::outbox_for(const NetAddr& peer) {
  const auto known = outbox_by_addr_.find(peer);
  if (known != outbox_by_addr_.end() && !outboxes_[static_cast<size_t>(known->second)].dead)
    return known->second;
  const int32_t region = map_peer(peer);
  if (region < 0) return -1;
  PeerRegion& r = regions_[static_cast<size_t>(region)];
  shm::RegionHeader* h = shm::header_of(r.base);
  for (uint32_t i = 0; i < r.layout.inbox_slots; ++i) {
    shm::SlotControl* slot = r.layout.slot(r.base, i);
    uint32_t expected = shm::kSlotFree;
    if (!slot->state.compare_exchange_strong(expected, shm::kSlotClaiming,
                                             std::memory_order_acq_rel))
      continue;
    slot->generation += 1;
    slot->sender_pid = static_cast<int32_t>(::getpid());
    slot->sender = local_;
    uint32_t used = h->slots_used.load(std::memory_order_relaxed);
    while (used < i + 1 &&
           !h->slots_used.compare_exchange_weak(used, i + 1, std::memory_order_relaxed)) {
    }
    Outbox o;
    o.region = static_cast<uint32_t>(region);
    o.slot = slot;
    o.ring = shm::ring_of(slot);
    o.head = slot->head.load(std::memory_order_relaxed);
    o.tail_seen = slot->tail.load(std::memory_order_acquire);
    o.doorbell_len = to_sockaddr(peer, o.doorbell);
    slot->state.store(shm::kSlotReady, std::memory_order_release);
    const auto index = static_cast<int32_t>(outboxes_.size());
    outboxes_.push_back(o);
    outbox_by_addr_[peer] = index;
    return index;
  }
  return -1;  // every slot of the peer's inbox is taken
}

bool ShmDatapath::reaches(const NetAddr& peer) {
  if (not_local_.count(peer) != 0) return false;
  if (outbox_for(peer) >= 0) return true;
  not_local_.insert(peer);
  return false;
}

void ShmDatapath::collect_dead_senders() {
  const uint32_t used =
      std::min(header_->slots_used.load(std::memory_order_acquire), layout_.inbox_slots);
  for (uint32_t i = 0; i < used; ++i) {
    shm::SlotControl* slot = layout_.slot(base_, i);
    if (slot->state.load(std::memory_order_acquire) != shm::kSlotReady) continue;
    if (process_is_alive(slot->sender_pid)) continue;
    // Its packets are dropped: nobody will acknowledge or retransmit them.
    const int32_t region = inbound_[i].region;
    inbound_[i] = {};
    if (region >= 0) forget_region(static_cast<uint32_t>(region));
    slot->head.store(0, std::memory_order_relaxed);
    slot->tail.store(0, std::memory_order_relaxed);
    slot->state.store(shm::kSlotFree, std::memory_order_release);
    ++stats_.slots_freed;
  }
}

void ShmDatapath::forget_region(uint32_t index) {
  PeerRegion& r = regions_[index];
  r.gone = true;
  for (Outbox& o : outboxes_) {
    if (o.region == index) o.dead = true;
  }
  if (region_views_[index] == 0) unmap_region(index);
}

void ShmDatapath::unmap_region(uint32_t index) {
  PeerRegion& r = regions_[index];
  if (r.base == nullptr) return;
  ::munmap(r.base, r.layout.total_bytes);
  r.base = nullptr;
}

void ShmDatapath::reclaim() {
  std::atomic<uint32_t>* lent = layout_.lent(base_);
  const auto take_back = [&](size_t k) {
    tx_free_.push_back(lent_[k]);
    lent_[k] = lent_.back();
    lent_.pop_back();
  };
  for (size_t k = lent_.size(); k-- > 0;) {
    if (lent[lent_[k]].load(std::memory_order_acquire) == 0) take_back(k);
  }
  if (!tx_free_.empty()) return;
  // Nothing came back: is a receiver holding buffers dead?
  bool any_dead = false;
  for (const Outbox& o : outboxes_) {
    if (o.dead || process_is_alive(regions_[o.region].pid)) continue;
    forget_region(o.region);  // marks o dead
    any_dead = true;
  }
  if (!any_dead) return;
  for (size_t k = lent_.size(); k-- > 0;) {
    if (!outboxes_[lent_to_[lent_[k]]].dead) continue;
    lent[lent_[k]].store(0, std::memory_order_relaxed);
    take_back(k);
    ++stats_.reclaimed_from_dead;
  }
}

}  // namespace spray::dp
