// Package idemproto lets idemgen's generated wrappers take and return
// protobuf messages (google.golang.org/protobuf generated types): the
// generated fingerprint of a request that is, or holds, a *pb.Message
// calls [Fingerprint], and the method description of one that returns a
// *pb.Message stores the response with [Encode] and [Decode]; the
// generated tests compare answers with [Equal]. It is a module of its own,
// so services without protobuf never see it among their requirements.
//
// # Fingerprint
//
// A message is hashed through protoreflect, by its populated fields in
// field-number order: each field as its number and its value. Field and
// message names are not hashed; unknown fields and the message's internal
// state are left out. Presence counts where the message records it: a
// proto3 optional field or a message field set to its zero value differs
// from one left unset, a oneof member set to zero from an unset oneof,
// while a proto3 field without presence set to zero is unset (the wire
// format cannot tell them apart either). Values are written by class:
// signed integers (int32, int64, sint*, sfixed*) alike, unsigned ones
// (uint*, fixed*) alike, enums by number, floats by their bits (so -0 and
// 0 differ) with every NaN one value, strings, bytes (nil as empty),
// repeated fields as a length and their elements, maps as a length and
// their entries sorted by key, nested messages (well-known types such as
// Timestamp, Duration, the wrappers and Struct included) recursively. An
// Any whose type is linked into the program (protoregistry.GlobalTypes) is
// hashed as its type URL and its decoded message, so two serializations of
// the same message are the same request; an Any of a type the program
// does not know is hashed as its type URL and raw bytes.
//
// What this means for changing a .proto while keys are kept: renaming a
// field, a message or an enum value, adding a field that old requests
// leave unset, and changing a field's type within its class (int32 to
// int64, uint32 to fixed64, bytes to bytes) keep a retry's fingerprint, so
// its stored answer replays. Renumbering a field, moving a type to another
// class (int64 to uint64, string to bytes), or wrapping a scalar in a
// message changes it, and a retry sent across the change is refused as a
// mismatch (idem.ErrMismatch), never answered from another request.
//
// The generated fingerprint of a request message that has an AIP-155
// request_id (a string field of that name) leaves that field out: it is the
// idempotency key (runtime/idemgrpc and runtime/idemconnect read it as
// such), so a retry that sends the key in metadata instead is the same
// request.
//
// [Version] is written first: it changes only when this encoding changes.
//
// # Responses
//
// [Encode] writes a response in protobuf's deterministic binary form
// behind a one-byte marker that tells a nil message from an empty one, and
// [Decode] reads it back; every caller, the first included, gets the
// decoded message, so a replay is [proto.Equal] to the first answer
// (unknown fields included). A message that cannot be marshaled (a proto3
// string that is not valid UTF-8, a proto2 required field unset) is an
// error when the response is stored: in atomic mode before COMMIT, so the
// work rolls back with the claim.
package idemproto
