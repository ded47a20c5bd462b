// Package wire speaks the Kafka protocol's outer layer: it cuts a byte stream
// into request frames, reads the request header that opens each frame, decodes
// the body with franz-go's kmsg, and frames responses with the header the
// client expects. It knows nothing of topics or logs; package node decides
// what each request means.
//
// # Frames
//
// A Kafka connection carries, in each direction, a sequence of frames. A frame
// is a 4-byte big-endian signed size followed by exactly that many bytes:
//
//	+--------+--------+--------+--------+----------------------------+
//	|        size (int32, big endian)   |  size bytes: header + body |
//	+--------+--------+--------+--------+----------------------------+
//
// TCP delivers the stream in chunks that bear no relation to frames: a chunk
// may end inside the size, hold ten frames, or a hundredth of one. A
// FrameReader is fed those chunks as they come and hands back whole frames
// with the size removed. A frame that lies wholly inside one chunk is returned
// as a slice of that chunk, without a copy; one that straddles chunks is
// gathered into a buffer of its own, each byte copied once.
//
// The size is checked the moment its fourth byte arrives, before anything is
// buffered for it: a negative size, or one above socket.request.max.bytes
// (100 MiB by default), ends the connection, as in Kafka. A peer speaking HTTP
// or TLS to a plaintext listener shows up here as an absurd size ("GET " is
// 1195725856); the error says so, because that is what an operator needs to
// read in the log.
//
// # Request headers
//
// Every request opens with a header, in one of three versions:
//
//	v0: api_key int16 | api_version int16 | correlation_id int32
//	v1: v0 | client_id nullable string (int16 length, -1 for null)
//	v2: v1 | tagged fields (uvarint count, then per field: uvarint tag,
//	                        uvarint size, size bytes)
//
// The header's own version is not on the wire: the reader works it out from
// the first four bytes. Version 2 is used when the API's request at that
// version is "flexible" (KIP-482: compact strings and arrays, tagged fields),
// version 1 otherwise, and version 0 only by ControlledShutdown v0. Even in v2
// the client id keeps its old int16 length, so that a broker can read the
// header of any ApiVersions request, including versions newer than itself.
// kmsg knows which versions of which API are flexible; this package asks it.
//
// A Metadata v1 request from client "kp" with correlation id 7, asking for
// every topic, is 12 bytes of header and 4 of body:
//
//	00 00 00 10             size 16
//	00 03 00 01             api key 3 (Metadata), version 1
//	00 00 00 07             correlation id 7
//	00 02 6b 70             client id "kp"
//	ff ff ff ff             body: topics = null (all topics)
//
// Kafka reads a null client id as empty, and so does RequestHeader. Unlike
// Kafka, which reads any negative length as null, a length below -1 is
// rejected as malformed: no client sends one.
//
// # Response headers
//
// A response frame is the size, a response header, and the body:
//
//	v0: correlation_id int32
//	v1: correlation_id int32 | tagged fields (a single 0 byte when empty)
//
// Header v1 is used exactly when the response version is flexible, with one
// exception: ApiVersions responses always use header v0, even at v3 and v4
// whose bodies are flexible. A client must be able to read the ApiVersions
// answer before it knows anything about the broker, including whether the
// broker understood its request version (KIP-511). Getting this wrong shifts
// every byte the client reads after the correlation id, and it fails in ways
// that point anywhere but here; ResponseHeaderVersion is the one place that
// decides.
//
// # Versions and ApiVersions
//
// A Table says which APIs the broker serves and in which version ranges. A
// request for an unknown API, or for a version outside the served range, gets
// an UnsupportedError; Kafka closes the connection for these. The exception
// is ApiVersions itself: clients send the newest version they know before
// they know the broker's, so a broker answers an ApiVersions request of any
// unserved version with a version 0 response carrying UNSUPPORTED_VERSION and
// the versions it serves, and the client retries with one of them. Kafka's
// answer lists only the ApiVersions entry; Sluice lists the whole table, as
// kfake does, which every client tried (franz-go, the Java client,
// librdkafka) accepts.
//
// Malformed requests never panic: every error is one of FrameSizeError,
// HeaderError, UnsupportedError or BodyError, each carrying what was read so
// that the node can log a useful line before closing the connection.
package wire
