// libFuzzer target: every UET wire decoder. Invariants checked on each input:
//   - no decoder reads outside the input (ASan) or hits undefined behaviour (UBSan);
//   - whatever decodes re-encodes, and the re-encoding decodes to the same bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "transport/wire/pds_header.h"
#include "transport/wire/ses_header.h"

namespace {

using namespace spray::wire;

// Extra room so that headers which announce a payload (responses with data) still
// decode after re-encoding.
constexpr size_t kRoom = 64 + kMaxSesPayloadLength;

// Returns the re-encoded header's size, 0 when `in` does not decode as an H.
template <class H>
size_t round_trip(ConstByteSpan in) {
  H h;
  if (decode(in, h) != DecodeError::kOk) return 0;
  std::vector<uint8_t> a(kRoom, 0), b(kRoom, 0);
  const size_t n = encode(h, a);
  if (n == 0) std::abort();  // a decoded header must be encodable
  H again;
  if (decode(ConstByteSpan(a), again) != DecodeError::kOk) std::abort();
  if (encode(again, b) != n || std::memcmp(a.data(), b.data(), n) != 0) std::abort();
  return n;
}

void ses_round_trips(ConstByteSpan in) {
  round_trip<SesStandardRequest>(in);
  round_trip<SesSmallRequest>(in);
  round_trip<SesMediumRequest>(in);
  round_trip<RendezvousExtension>(in);
  round_trip<AtomicExtension>(in);
  round_trip<AtomicCompareSwapExtension>(in);
  round_trip<SesResponse>(in);
  round_trip<SesResponseWithData>(in);
  round_trip<SesSmallResponseWithData>(in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ConstByteSpan in(data, size);
  Prologue p;
  (void)decode_prologue(in, p);
  const size_t request = round_trip<PdsRequest>(in);
  round_trip<PdsAck>(in);
  round_trip<PdsNack>(in);
  round_trip<PdsCtrl>(in);
  round_trip<PdsRudi>(in);
  round_trip<PdsUud>(in);
  ses_round_trips(in);
  // Behind a request's PDS header, where the engine reads it, the SES header (the seeds
  // are whole packets recorded from real conversations).
  if (request > 0 && request <= in.size()) ses_round_trips(in.subspan(request));
  return 0;
}
