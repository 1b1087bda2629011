// Golden vectors for the SES headers, written from the UET 1.0 layouts.
#include "transport/wire/ses_header.h"

#include <gtest/gtest.h>

#include <vector>

namespace spray::wire {
namespace {

using Bytes = std::vector<uint8_t>;

// Encoded into bytes that are not zero, as a reused packet buffer is: the encoder
// writes its header in place and must set every byte, reserved ones included.
template <class H>
Bytes encoded(const H& h, size_t size) {
  Bytes out(size, 0xa5);
  EXPECT_EQ(encode(h, out), size);
  return out;
}

template <class H>
void expect_prefixes_truncated(const Bytes& full, size_t header) {
  for (size_t n = 0; n < header; ++n) {
    H h;
    EXPECT_EQ(decode(ConstByteSpan(full.data(), n), h), DecodeError::kTruncated) << n;
  }
}

SesStandardRequest standard_som() {
  SesStandardRequest s;
  s.common.opcode = SesOpcode::kTaggedSend;
  s.common.flags = ses_flags::kStartOfMessage | ses_flags::kEndOfMessage | ses_flags::kHeaderData;
  s.common.message_id = 0x1234;
  s.common.ri_generation = 0x05;
  s.common.job_id = 0x0a0b0c;
  s.common.pid_on_fep = 0x123;
  s.common.resource_index = 0x456;
  s.buffer_offset = 0x1000;
  s.initiator = 7;
  s.match_bits = 0xfeedfacecafef00dULL;
  s.header_data = 0x0102030405060708ULL;
  s.request_length = 0x10000;
  return s;
}

const Bytes kStandardSom = {0x09, 0x07, 0x12, 0x34, 0x05, 0x0a, 0x0b, 0x0c,
                            0x01, 0x23, 0x04, 0x56,                          // common
                            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,  // buffer offset
                            0x00, 0x00, 0x00, 0x07,                          // initiator
                            0xfe, 0xed, 0xfa, 0xce, 0xca, 0xfe, 0xf0, 0x0d,  // match bits
                            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // header data
                            0x00, 0x01, 0x00, 0x00};                         // request length

TEST(SesStandardRequest, encode__start_of_message_golden) {
  EXPECT_EQ(encoded(standard_som(), kSesStandardBytes), kStandardSom);
  SesStandardRequest d;
  ASSERT_EQ(decode(kStandardSom, d), DecodeError::kOk);
  EXPECT_EQ(d.common.opcode, SesOpcode::kTaggedSend);
  EXPECT_TRUE(d.common.has(ses_flags::kStartOfMessage));
  EXPECT_TRUE(d.common.has(ses_flags::kHeaderData));
  EXPECT_EQ(d.common.message_id, 0x1234);
  EXPECT_EQ(d.common.ri_generation, 0x05);
  EXPECT_EQ(d.common.job_id, 0x0a0b0cu);
  EXPECT_EQ(d.common.pid_on_fep, 0x123);
  EXPECT_EQ(d.common.resource_index, 0x456);
  EXPECT_EQ(d.buffer_offset, 0x1000u);
  EXPECT_EQ(d.initiator, 7u);
  EXPECT_EQ(d.match_bits, 0xfeedfacecafef00dULL);
  EXPECT_EQ(d.header_data, 0x0102030405060708ULL);
  EXPECT_EQ(d.request_length, 0x10000u);
  expect_prefixes_truncated<SesStandardRequest>(kStandardSom, kSesStandardBytes);
}

TEST(SesStandardRequest, encode__middle_packet_carries_length_and_offset) {
  SesStandardRequest s = standard_som();
  s.common.flags = ses_flags::kEndOfMessage;
  s.payload_length = 4000;
  s.message_offset = 0x2000;
  const Bytes b = encoded(s, kSesStandardBytes);
  const Bytes field(b.begin() + 32, b.begin() + 40);
  EXPECT_EQ(field, (Bytes{0x00, 0x00, 0x0f, 0xa0, 0x00, 0x00, 0x20, 0x00}));
  SesStandardRequest d;
  ASSERT_EQ(decode(b, d), DecodeError::kOk);
  EXPECT_EQ(d.payload_length, 4000);
  EXPECT_EQ(d.message_offset, 0x2000u);
  Bytes reserved = b;
  reserved[32] = 0x80;  // bits above the 14-bit payload length
  EXPECT_EQ(decode(reserved, d), DecodeError::kReservedBitsSet);
}

TEST(SesStandardRequest, decode__rejects_version_opcode_and_reserved) {
  SesStandardRequest d;
  Bytes v = kStandardSom;
  v[1] |= 0x40;
  EXPECT_EQ(decode(v, d), DecodeError::kBadVersion);
  Bytes op = kStandardSom;
  op[0] = 0x12;
  EXPECT_EQ(decode(op, d), DecodeError::kBadOpcode);
  Bytes high = kStandardSom;
  high[0] |= 0x40;
  EXPECT_EQ(decode(high, d), DecodeError::kReservedBitsSet);
  Bytes pid = kStandardSom;
  pid[8] |= 0x10;
  EXPECT_EQ(decode(pid, d), DecodeError::kReservedBitsSet);
}

TEST(SesStandardRequest, encode__refuses_fields_wider_than_the_wire) {
  SesStandardRequest s = standard_som();
  s.common.job_id = 0x1000000;
  Bytes out(kSesStandardBytes);
  EXPECT_EQ(encode(s, out), 0u);
  s = standard_som();
  s.common.pid_on_fep = 0x1000;
  EXPECT_EQ(encode(s, out), 0u);
}

TEST(SesSmallRequest, encode__golden) {
  SesSmallRequest s;
  s.common.opcode = SesOpcode::kWrite;
  s.common.flags = ses_flags::kStartOfMessage | ses_flags::kEndOfMessage;
  s.common.message_id = 64;  // request length on small requests
  s.buffer_offset = 0x20;
  const Bytes golden = {0x01, 0x03, 0x00, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20};
  EXPECT_EQ(encoded(s, kSesSmallBytes), golden);
  SesSmallRequest d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_EQ(d.common.message_id, 64);
  expect_prefixes_truncated<SesSmallRequest>(golden, kSesSmallBytes);
  s.common.message_id = 0x4000;
  Bytes out(kSesSmallBytes);
  EXPECT_EQ(encode(s, out), 0u);
}

TEST(SesMediumRequest, encode__golden) {
  SesMediumRequest s;
  s.common.opcode = SesOpcode::kSend;
  s.common.flags = ses_flags::kStartOfMessage | ses_flags::kEndOfMessage;
  s.common.message_id = 8;
  s.header_data_or_buffer_offset = 0x99;
  s.initiator = 3;
  s.match_bits = 0x77;
  const Bytes golden = {0x05, 0x03, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                        0,    0,    0,    0x99, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0x77};
  EXPECT_EQ(encoded(s, kSesMediumBytes), golden);
  SesMediumRequest d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_EQ(d.match_bits, 0x77u);
  expect_prefixes_truncated<SesMediumRequest>(golden, kSesMediumBytes);
}

TEST(RendezvousExtension, encode__golden) {
  RendezvousExtension x;
  x.eager_length = 0;
  x.ri_generation = 1;
  x.pid_on_fep = 2;
  x.resource_index = 3;
  x.read_offset = 0x10;
  x.read_key = 0xabc;
  const Bytes golden = {0, 0, 0, 0,    0x01, 0x00, 0x20, 0x03, 0, 0, 0,    0,
                        0, 0, 0, 0x10, 0,    0,    0,    0,    0, 0, 0x0a, 0xbc};
  EXPECT_EQ(encoded(x, kRendezvousExtensionBytes), golden);
  RendezvousExtension d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_EQ(d.pid_on_fep, 2);
  EXPECT_EQ(d.resource_index, 3);
  EXPECT_EQ(d.read_key, 0xabcu);
}

TEST(AtomicExtension, encode__golden) {
  AtomicExtension x;
  x.opcode = AmoOpcode::kSum;
  x.datatype = AmoDatatype::kDouble;
  x.semantic_control = amo_control::kCpuCoherent;
  const Bytes golden = {0x02, 0x0b, 0x02, 0x00};
  EXPECT_EQ(encoded(x, kAtomicExtensionBytes), golden);
  AtomicExtension d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_EQ(d.opcode, AmoOpcode::kSum);
  EXPECT_EQ(d.datatype, AmoDatatype::kDouble);
  EXPECT_EQ(d.semantic_control, amo_control::kCpuCoherent);
  expect_prefixes_truncated<AtomicExtension>(golden, kAtomicExtensionBytes);
}

TEST(AtomicExtension, decode__rejects_undefined_opcodes_types_and_reserved_bits) {
  AtomicExtension d;
  EXPECT_EQ(decode(Bytes{0x14, 0x00, 0x00, 0x00}, d), DecodeError::kBadOpcode);
  EXPECT_EQ(decode(Bytes{0x00, 0x12, 0x00, 0x00}, d), DecodeError::kBadOpcode);
  EXPECT_EQ(decode(Bytes{0x00, 0x00, 0x04, 0x00}, d), DecodeError::kReservedBitsSet);
  EXPECT_EQ(decode(Bytes{0x00, 0x00, 0x00, 0x01}, d), DecodeError::kReservedBitsSet);
  AtomicExtension bad;
  bad.semantic_control = 0x80;
  Bytes out(kAtomicExtensionBytes);
  EXPECT_EQ(encode(bad, out), 0u);
}

TEST(AtomicCompareSwapExtension, encode__golden) {
  AtomicCompareSwapExtension x;
  x.common.opcode = AmoOpcode::kCompareSwap;
  x.common.datatype = AmoDatatype::kUint32;
  x.compare_low = 0x11223344;
  x.swap_high = 0x01;
  x.swap_low = 0x55;
  const Bytes golden = {0x0d, 0x05, 0x00, 0x00,  // opcode, type
                        0,    0,    0,    0,    0, 0, 0, 0,    0, 0, 0, 0, 0x11, 0x22, 0x33, 0x44,
                        0,    0,    0,    0,    0, 0, 0, 0x01, 0, 0, 0, 0, 0,    0,    0,    0x55};
  EXPECT_EQ(encoded(x, kAtomicCompareSwapExtensionBytes), golden);
  AtomicCompareSwapExtension d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_EQ(d.common.opcode, AmoOpcode::kCompareSwap);
  EXPECT_EQ(d.common.datatype, AmoDatatype::kUint32);
  EXPECT_EQ(d.compare_low, 0x11223344u);
  EXPECT_EQ(d.swap_high, 1u);
  EXPECT_EQ(d.swap_low, 0x55u);
  expect_prefixes_truncated<AtomicCompareSwapExtension>(golden, kAtomicCompareSwapExtensionBytes);
}

TEST(SesResponse, encode__golden) {
  SesResponse r;
  r.common.opcode = SesResponseOpcode::kResponse;
  r.common.return_code = ReturnCode::kOk;
  r.common.message_id = 0x8001;
  r.common.job_id = 1;
  r.modified_length = 0x100;
  const Bytes golden = {0x01, 0x01, 0x80, 0x01, 0, 0, 0, 1, 0, 0, 1, 0};
  EXPECT_EQ(encoded(r, kSesResponseBytes), golden);
  SesResponse d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_EQ(d.common.return_code, ReturnCode::kOk);
  EXPECT_EQ(d.modified_length, 0x100u);
  expect_prefixes_truncated<SesResponse>(golden, kSesResponseBytes);
  Bytes bad_rc = golden;
  bad_rc[1] = 0x25;
  EXPECT_EQ(decode(bad_rc, d), DecodeError::kBadReturnCode);
  Bytes bad_op = golden;
  bad_op[0] = 0x04;
  EXPECT_EQ(decode(bad_op, d), DecodeError::kBadOpcode);
}

TEST(SesResponse, return_codes__match_uet_values) {
  EXPECT_EQ(static_cast<int>(ReturnCode::kNoMatch), 0x05);
  EXPECT_EQ(static_cast<int>(ReturnCode::kPermissionViolation), 0x17);
  EXPECT_EQ(static_cast<int>(ReturnCode::kBadMemoryKey), 0x1c);
  EXPECT_EQ(static_cast<int>(ReturnCode::kBadAddress), 0x1d);
  EXPECT_EQ(static_cast<int>(ReturnCode::kTooLong), 0x22);
  EXPECT_EQ(static_cast<int>(ReturnCode::kDropped), 0x24);
}

TEST(SesResponseWithData, encode__golden_and_payload_bound) {
  SesResponseWithData r;
  r.common.opcode = SesResponseOpcode::kResponseWithData;
  r.common.message_id = 0x8002;
  r.read_message_id = 0x8002;
  r.payload_length = 16;
  r.modified_length = 0x20;
  r.message_offset = 0x10;
  Bytes b(kSesResponseWithDataBytes + 16, 0);
  ASSERT_EQ(encode(r, b), kSesResponseWithDataBytes);
  const Bytes header(b.begin(), b.begin() + kSesResponseWithDataBytes);
  EXPECT_EQ(header, (Bytes{0x02, 0x01, 0x80, 0x02, 0, 0,    0, 0, 0x80, 0x02,
                           0x00, 0x10, 0,    0,    0, 0x20, 0, 0, 0,    0x10}));
  SesResponseWithData d;
  ASSERT_EQ(decode(b, d), DecodeError::kOk);
  EXPECT_EQ(d.payload_length, 16);
  // The header may not announce more payload than the packet holds.
  EXPECT_EQ(decode(ConstByteSpan(b.data(), b.size() - 1), d), DecodeError::kBadLength);
}

TEST(SesSmallResponseWithData, encode__golden) {
  SesSmallResponseWithData r;
  r.common.opcode = SesResponseOpcode::kResponseWithData;
  r.common.message_id = 4;  // payload length
  r.original_request_psn = 0x55;
  Bytes b(kSesSmallResponseWithDataBytes + 4, 0);
  ASSERT_EQ(encode(r, b), kSesSmallResponseWithDataBytes);
  SesSmallResponseWithData d;
  ASSERT_EQ(decode(b, d), DecodeError::kOk);
  EXPECT_EQ(d.original_request_psn, 0x55u);
  EXPECT_EQ(decode(ConstByteSpan(b.data(), kSesSmallResponseWithDataBytes + 3), d),
            DecodeError::kBadLength);
}

// The JobID is read from requests and responses alike without decoding them, and the
// RI generation above it does not leak into it.
TEST(PeekJobId, reads_requests_and_responses_and_refuses_a_short_header) {
  SesStandardRequest request = standard_som();
  request.common.ri_generation = 0xff;
  request.common.job_id = 0x00abcdef;
  const Bytes req = encoded(request, kSesStandardBytes);
  EXPECT_EQ(peek_job_id(req), 0x00abcdefu);

  SesResponse response;
  response.common.ri_generation = 0x80;
  response.common.job_id = 0x00123456;
  const Bytes resp = encoded(response, kSesResponseBytes);
  EXPECT_EQ(peek_job_id(resp), 0x00123456u);

  EXPECT_EQ(peek_job_id(ConstByteSpan(req.data(), 7)), std::nullopt);
  EXPECT_EQ(peek_job_id(ConstByteSpan(req.data(), 8)), 0x00abcdefu);
}

}  // namespace
}  // namespace spray::wire
