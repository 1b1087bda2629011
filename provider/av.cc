// fid_av: address vector. Entries are endpoint names in the domain's address format
// (endpoint_name.h: socket addresses, or FI_ADDR_IB_UD names over verbs); fi_addr_t is the entry's
// index for FI_AV_MAP and FI_AV_TABLE alike. Removed entries leave a hole that is never reused, so
// a stale fi_addr_t can never name a different peer.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "provider/endpoint_name.h"
#include "provider/spray_fi.h"

namespace spray::fi {
namespace {

int av_close(fid* f) {
  auto* av = fid_to<AddressVector>(f);
  {
    std::lock_guard lock(av->domain->mutex);
    if (av->refs > 0) return -FI_EBUSY;
    --av->domain->refs;
  }
  delete av;
  return FI_SUCCESS;
}

int av_insert(fid_av* f, const void* addr, size_t count, fi_addr_t* fi_addr, uint64_t flags,
              void* context) {
  auto* av = fid_to<AddressVector>(f);
  if (flags != 0 || (count > 0 && !addr)) return -FI_EINVAL;
  (void)context;
  std::lock_guard lock(av->domain->mutex);
  const auto* p = static_cast<const uint8_t*>(addr);
  int inserted = 0;
  for (size_t i = 0; i < count; ++i) {
    dp::NetAddr a;
    if (!decode_name(av->addr_format, p, a)) {
      SPRAY_WARN(FI_LOG_AV, "fi_av_insert: entry %zu is not a %s\n", i,
                 av->addr_format == FI_ADDR_IB_UD ? "FI_ADDR_IB_UD name with a QP number"
                                                  : "IPv4/IPv6 socket address");
      if (fi_addr) fi_addr[i] = FI_ADDR_NOTAVAIL;
      p += usual_name_length(av->addr_format);  // the entry's own size is unknowable
      continue;
    }
    p += name_length(av->addr_format, p);
    const fi_addr_t index = av->addrs.size();
    av->addrs.push_back(a);
    av->valid.push_back(true);
    av->by_hash.emplace(a.hash(), index);
    if (fi_addr) fi_addr[i] = index;
    ++inserted;
  }
  return inserted;
}

int av_insertsvc(fid_av* f, const char* node, const char* service, fi_addr_t* fi_addr,
                 uint64_t flags, void* context) {
  if (!is_socket_format(fid_to<AddressVector>(f)->addr_format)) {
    SPRAY_WARN(FI_LOG_AV, "fi_av_insertsvc: verbs endpoints have no node/service names\n");
    return -FI_EINVAL;
  }
  sockaddr_storage ss{};
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (!node || !service) return -FI_EINVAL;
  const int port = std::atoi(service);
  if (port <= 0 || port > 65535) return -FI_EINVAL;
  if (inet_pton(AF_INET, node, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(port));
  } else if (inet_pton(AF_INET6, node, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
  } else {
    return -FI_EINVAL;
  }
  return av_insert(f, &ss, 1, fi_addr, flags, context);
}

int av_insertsym(fid_av*, const char*, size_t, const char*, size_t, fi_addr_t*, uint64_t, void*) {
  return -FI_ENOSYS;
}

int av_remove(fid_av* f, fi_addr_t* fi_addr, size_t count, uint64_t flags) {
  auto* av = fid_to<AddressVector>(f);
  if (flags != 0) return -FI_EINVAL;
  std::lock_guard lock(av->domain->mutex);
  for (size_t i = 0; i < count; ++i) {
    if (fi_addr[i] >= av->addrs.size() || !av->valid[fi_addr[i]]) return -FI_EINVAL;
  }
  for (size_t i = 0; i < count; ++i) {
    av->valid[fi_addr[i]] = false;
    av->by_hash.erase(av->addrs[fi_addr[i]].hash());
  }
  return FI_SUCCESS;
}

int av_lookup(fid_av* f, fi_addr_t fi_addr, void* addr, size_t* addrlen) {
  auto* av = fid_to<AddressVector>(f);
  std::lock_guard lock(av->domain->mutex);
  if (fi_addr >= av->addrs.size() || !av->valid[fi_addr]) return -FI_ENOENT;
  const size_t room = addr ? *addrlen : 0;
  sockaddr_storage name{};  // room for every format's name
  *addrlen = encode_name(av->addrs[fi_addr], &name, sizeof(name));
  if (addr) std::memcpy(addr, &name, std::min(room, *addrlen));
  return room < *addrlen ? -FI_ETOOSMALL : FI_SUCCESS;
}

const char* av_straddr(fid_av* f, const void* addr, char* buf, size_t* len) {
  const std::string text = name_to_string(fid_to<AddressVector>(f)->addr_format, addr);
  if (*len > 0) {
    const size_t n = std::min(text.size(), *len - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  *len = text.size() + 1;
  return buf;
}

int no_av_set(fid_av*, fi_av_set_attr*, fid_av_set**, void*) {
  return -FI_ENOSYS;
}

fi_ops av_fi_ops = {
    .size = sizeof(fi_ops),
    .close = av_close,
    .bind = no_bind,
    .control = no_control,
    .ops_open = no_ops_open,
    .tostr = nullptr,
    .ops_set = nullptr,
};

fi_ops_av av_ops = {
    .size = sizeof(fi_ops_av),
    .insert = av_insert,
    .insertsvc = av_insertsvc,
    .insertsym = av_insertsym,
    .remove = av_remove,
    .lookup = av_lookup,
    .straddr = av_straddr,
    .av_set = no_av_set,
};

}  // namespace

fi_addr_t AddressVector::find(const dp::NetAddr& a) const {
  const auto it = by_hash.find(a.hash());
  return it == by_hash.end() ? FI_ADDR_NOTAVAIL : it->second;
}

int av_open(fid_domain* domain, fi_av_attr* attr, fid_av** out, void* context) {
  if (!attr) return -FI_EINVAL;
  if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE) {
    return -FI_EINVAL;
  }
  if (attr->flags & (FI_EVENT | FI_READ | FI_SYMMETRIC)) {
    SPRAY_WARN(FI_LOG_AV, "AV flags %#lx not supported\n", static_cast<unsigned long>(attr->flags));
    return -FI_ENOSYS;
  }
  if (attr->name) return -FI_ENOSYS;  // no shared (named) AVs
  auto* d = fid_to<Domain>(domain);
  auto* av = new (std::nothrow) AddressVector;
  if (!av) return -FI_ENOMEM;
  av->domain = d;
  av->addr_format = d->info->addr_format;
  av->type = attr->type == FI_AV_MAP ? FI_AV_MAP : FI_AV_TABLE;
  if (attr->type == FI_AV_UNSPEC) attr->type = av->type;
  av->addrs.reserve(attr->count);
  av->fid.fid.fclass = FI_CLASS_AV;
  av->fid.fid.context = context;
  av->fid.fid.ops = &av_fi_ops;
  av->fid.ops = &av_ops;
  {
    std::lock_guard lock(d->mutex);
    ++d->refs;
  }
  *out = &av->fid;
  return FI_SUCCESS;
}

}  // namespace spray::fi
