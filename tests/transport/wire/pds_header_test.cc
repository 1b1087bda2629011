// Golden vectors for the PDS headers, written byte by byte from the UET 1.0 layouts
// (prologue: type 15..11, next header / control type 10..7, flags 6..0; big-endian).
#include "transport/wire/pds_header.h"

#include <gtest/gtest.h>

#include <vector>

namespace spray::wire {
namespace {

using Bytes = std::vector<uint8_t>;

// Encoded into bytes that are not zero, as a reused packet buffer is: the encoder
// writes its header in place and must set every byte, reserved ones included.
template <class H>
Bytes encoded(const H& h) {
  Bytes out(encoded_size(h), 0xa5);
  EXPECT_EQ(encode(h, out), out.size());
  return out;
}

// Every strict prefix of a valid header must be rejected as truncated.
template <class H>
void expect_prefixes_truncated(const Bytes& full) {
  for (size_t n = 0; n < full.size(); ++n) {
    H h;
    EXPECT_EQ(decode(ConstByteSpan(full.data(), n), h), DecodeError::kTruncated) << "prefix " << n;
  }
}

TEST(PdsRequest, encode__rud_syn_golden) {
  PdsRequest r;
  r.next = NextHeader::kSesStandardRequest;
  r.flags = request_flags::kAckRequested | request_flags::kSyn;
  r.clear_psn_offset = -2;
  r.psn = 0x01020304;
  r.spdcid = 0x0a0b;
  r.syn = {1, 0x123};
  const Bytes golden = {0x11, 0x8c, 0xff, 0xfe, 0x01, 0x02, 0x03, 0x04, 0x0a, 0x0b, 0x11, 0x23};
  EXPECT_EQ(encoded(r), golden);
  PdsRequest d;
  size_t consumed = 0;
  ASSERT_EQ(decode(golden, d, &consumed), DecodeError::kOk);
  EXPECT_EQ(consumed, kRequestBytes);
  EXPECT_FALSE(d.ordered);
  EXPECT_TRUE(d.is_syn());
  EXPECT_EQ(d.clear_psn_offset, -2);
  EXPECT_EQ(d.psn, 0x01020304u);
  EXPECT_EQ(d.spdcid, 0x0a0b);
  EXPECT_EQ(d.syn.pdc_info, 1);
  EXPECT_EQ(d.syn.psn_offset, 0x123);
  expect_prefixes_truncated<PdsRequest>(golden);
}

TEST(PdsRequest, encode__rod_retransmit_golden) {
  PdsRequest r;
  r.ordered = true;
  r.flags = request_flags::kRetransmit;
  r.psn = 0xdeadbeef;
  r.spdcid = 1;
  r.dpdcid = 2;
  const Bytes golden = {0x19, 0x90, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x01, 0x00, 0x02};
  EXPECT_EQ(encoded(r), golden);
  PdsRequest d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_TRUE(d.ordered);
  EXPECT_FALSE(d.is_syn());
  EXPECT_EQ(d.dpdcid, 2);
}

TEST(PdsRequest, encode__cc_state_appends_four_bytes) {
  PdsRequest r;
  r.has_cc_state = true;
  r.cc_state = 0xa1b2c3d4;
  const Bytes b = encoded(r);
  ASSERT_EQ(b.size(), kRequestBytes + 4);
  EXPECT_EQ(b[0] >> 3, 0x0d);  // RUD_CC request
  PdsRequest d;
  ASSERT_EQ(decode(b, d), DecodeError::kOk);
  EXPECT_EQ(d.cc_state, 0xa1b2c3d4u);
}

TEST(PdsRequest, decode__rejects_bad_fields) {
  Bytes b = {0x11, 0x8c, 0xff, 0xfe, 0x01, 0x02, 0x03, 0x04, 0x0a, 0x0b, 0x11, 0x23};
  PdsRequest d;
  Bytes reserved = b;
  reserved[1] |= 0x40;  // reserved request flag
  EXPECT_EQ(decode(reserved, d), DecodeError::kReservedBitsSet);
  Bytes next = b;
  next[1] = static_cast<uint8_t>((next[1] & 0x7f) | 0x80);
  next[0] = static_cast<uint8_t>((next[0] & 0xf8) | 0x03);  // next header 7+
  EXPECT_EQ(decode(next, d), DecodeError::kBadNextHeader);
  Bytes ack = b;
  ack[0] = 0x07 << 3;
  EXPECT_EQ(decode(ack, d), DecodeError::kWrongType);
}

TEST(PdsAck, encode__ack_cc_golden) {
  PdsAck a;
  a.has_cc = true;
  a.flags = ack_flags::kEcnMarked;
  a.ack_psn_offset = 3;
  a.cack_psn = 0x100;
  a.spdcid = 5;
  a.dpdcid = 6;
  a.cc_type = 1;
  a.cc_flags = 2;
  a.mpr = 7;
  a.sack_psn_offset = 1;
  a.sack_bitmap = 0x8000000000000001ULL;
  a.cc_state = 0x1122334455667788ULL;
  const Bytes golden = {0x40, 0x20, 0x00, 0x03, 0x00, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00,
                        0x06, 0x12, 0x07, 0x00, 0x01, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
                        0x00, 0x01, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  EXPECT_EQ(encoded(a), golden);
  PdsAck d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_TRUE(d.has_cc);
  EXPECT_EQ(d.flags, ack_flags::kEcnMarked);
  EXPECT_EQ(d.cack_psn, 0x100u);
  EXPECT_EQ(d.sack_bitmap, 0x8000000000000001ULL);
  EXPECT_EQ(d.cc_state, 0x1122334455667788ULL);
  EXPECT_EQ(d.cc_type, 1);
  EXPECT_EQ(d.cc_flags, 2);
  EXPECT_EQ(d.mpr, 7);
  expect_prefixes_truncated<PdsAck>(golden);
}

TEST(PdsAck, encode__plain_ack_golden) {
  PdsAck a;
  a.ack_psn_offset = -1;
  a.cack_psn = 9;
  a.spdcid = 1;
  a.dpdcid = 2;
  const Bytes golden = {0x38, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x09, 0x00, 0x01, 0x00, 0x02};
  EXPECT_EQ(encoded(a), golden);
  PdsAck d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_FALSE(d.has_cc);
  EXPECT_EQ(d.ack_psn_offset, -1);
}

TEST(PdsNack, encode__trimmed_golden) {
  PdsNack n;
  n.code = NackCode::kTrimmed;
  n.flags = nack_flags::kRetransmit;
  n.psn = 0x10;
  n.spdcid = 3;
  n.dpdcid = 4;
  n.payload = 0xcafebabe;
  const Bytes golden = {0x50, 0x10, 0x01, 0x00, 0x00, 0x00, 0x00, 0x10,
                        0x00, 0x03, 0x00, 0x04, 0xca, 0xfe, 0xba, 0xbe};
  EXPECT_EQ(encoded(n), golden);
  PdsNack d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_EQ(d.code, NackCode::kTrimmed);
  EXPECT_EQ(d.payload, 0xcafebabeu);
  expect_prefixes_truncated<PdsNack>(golden);
}

TEST(PdsNack, codes__match_uet_values) {
  EXPECT_EQ(static_cast<int>(NackCode::kTrimmed), 0x01);
  EXPECT_EQ(static_cast<int>(NackCode::kTrimmedLastHop), 0x02);
  EXPECT_EQ(static_cast<int>(NackCode::kNoPdcAvailable), 0x04);
  EXPECT_EQ(static_cast<int>(NackCode::kPsnOutOfWindow), 0x0b);
  EXPECT_EQ(static_cast<int>(NackCode::kRodOutOfOrder), 0x0d);
  EXPECT_EQ(static_cast<int>(NackCode::kInvalidSyn), 0x15);
  for (int c : {0x00, 0x0c, 0x1b, 0x80, 0xfc}) {
    Bytes b = {0x50, 0x00, static_cast<uint8_t>(c), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    PdsNack d;
    EXPECT_EQ(decode(b, d), DecodeError::kBadNackCode) << c;
  }
}

TEST(PdsCtrl, encode__close_golden) {
  PdsCtrl c;
  c.type = CtrlType::kClose;
  c.flags = ctrl_flags::kAckRequested;
  c.psn = 7;
  c.spdcid = 1;
  c.dpdcid = 2;
  const Bytes golden = {0x5a, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07,
                        0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(encoded(c), golden);
  PdsCtrl d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_EQ(d.type, CtrlType::kClose);
  expect_prefixes_truncated<PdsCtrl>(golden);
}

TEST(PdsCtrl, types__every_defined_type_round_trips_and_others_fail) {
  for (uint8_t t = 0; t < 16; ++t) {
    Bytes b(kCtrlBytes, 0);
    b[0] = static_cast<uint8_t>((0x0b << 3) | (t >> 1));
    b[1] = static_cast<uint8_t>((t & 1) << 7);
    PdsCtrl d;
    if (t <= 9) {
      ASSERT_EQ(decode(b, d), DecodeError::kOk) << int(t);
      EXPECT_EQ(static_cast<uint8_t>(d.type), t);
      EXPECT_EQ(encoded(d), b);
    } else {
      EXPECT_EQ(decode(b, d), DecodeError::kBadControlType) << int(t);
    }
  }
}

TEST(PdsCtrl, encode__probe_and_credit_with_syn_form) {
  PdsCtrl c;
  c.type = CtrlType::kCreditRequest;
  c.flags = ctrl_flags::kSyn | ctrl_flags::kRod;
  c.syn = {0, 0xfff};
  c.payload = 1234;
  const Bytes b = encoded(c);
  EXPECT_EQ(b[10], 0x0f);
  EXPECT_EQ(b[11], 0xff);
  PdsCtrl d;
  ASSERT_EQ(decode(b, d), DecodeError::kOk);
  EXPECT_EQ(d.syn.psn_offset, 0xfff);
  EXPECT_EQ(d.payload, 1234u);
}

TEST(PdsRudi, encode__request_and_response_golden) {
  PdsRudi r;
  r.packet_id = 0x01020304;
  EXPECT_EQ(encoded(r), (Bytes{0x21, 0x80, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04}));
  PdsRudi resp;
  resp.response = true;
  resp.next = NextHeader::kSesResponse;
  resp.packet_id = 9;
  const Bytes golden = {0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09};
  EXPECT_EQ(encoded(resp), golden);
  PdsRudi d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_TRUE(d.response);
  EXPECT_EQ(d.packet_id, 9u);
  expect_prefixes_truncated<PdsRudi>(golden);
  Bytes reserved = golden;
  reserved[3] = 1;
  EXPECT_EQ(decode(reserved, d), DecodeError::kReservedBitsSet);
}

TEST(PdsUud, encode__golden) {
  const Bytes golden = {0x31, 0x80, 0x00, 0x00};
  EXPECT_EQ(encoded(PdsUud{NextHeader::kSesStandardRequest}), golden);
  PdsUud d;
  ASSERT_EQ(decode(golden, d), DecodeError::kOk);
  EXPECT_EQ(d.next, NextHeader::kSesStandardRequest);
  expect_prefixes_truncated<PdsUud>(golden);
  Bytes flagged = golden;
  flagged[1] |= 0x01;
  EXPECT_EQ(decode(flagged, d), DecodeError::kReservedBitsSet);
}

TEST(PdsHeader, encode__refuses_short_output) {
  uint8_t small[11];
  EXPECT_EQ(encode(PdsRequest{}, small), 0u);
  EXPECT_EQ(encode(PdsNack{}, small), 0u);
  PdsAck cc;
  cc.has_cc = true;
  uint8_t thirty[30];
  EXPECT_EQ(encode(cc, thirty), 0u);
}

}  // namespace
}  // namespace spray::wire
