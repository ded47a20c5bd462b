package raftmeta

import "fmt"

// TopicID is a topic's 16-byte UUID, as Kafka's protocol carries it.
type TopicID [16]byte

// IncarnationID is a broker process's 16-byte UUID, drawn afresh each time
// the process starts (Kafka's BrokerRegistration incarnation id). A
// registration with the same node id and the same incarnation is the same
// process asking again; a different incarnation is a restart.
type IncarnationID [16]byte

// IsZero reports whether the ID is unset (Kafka's "zero UUID").
func (id TopicID) IsZero() bool { return id == TopicID{} }

// IsZero reports whether the ID is unset.
func (id IncarnationID) IsZero() bool { return id == IncarnationID{} }

// String formats the ID as a canonical hex UUID (Kafka's tools print URL-safe
// base64; the hex form is what logs and file names here use).
func (id TopicID) String() string { return formatUUID(id) }

// String formats the ID as a canonical hex UUID.
func (id IncarnationID) String() string { return formatUUID(id) }

// MarshalText writes the canonical UUID form, so journals stay readable.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// MarshalText writes the canonical UUID form.
func (id IncarnationID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the canonical UUID form.
func (id *TopicID) UnmarshalText(p []byte) error {
	parsed, err := ParseTopicID(string(p))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// UnmarshalText parses the canonical UUID form.
func (id *IncarnationID) UnmarshalText(p []byte) error {
	parsed, err := parseUUID(string(p))
	if err != nil {
		return fmt.Errorf("incarnation id: %w", err)
	}
	*id = parsed
	return nil
}

// ParseTopicID parses a canonical hex UUID ("8-4-4-4-12").
func ParseTopicID(s string) (TopicID, error) {
	id, err := parseUUID(s)
	if err != nil {
		return TopicID{}, fmt.Errorf("topic id: %w", err)
	}
	return id, nil
}

// ParseIncarnationID parses a canonical hex UUID ("8-4-4-4-12").
func ParseIncarnationID(s string) (IncarnationID, error) {
	id, err := parseUUID(s)
	if err != nil {
		return IncarnationID{}, fmt.Errorf("incarnation id: %w", err)
	}
	return id, nil
}

func formatUUID(id [16]byte) string {
	const hexdigits = "0123456789abcdef"
	var b [36]byte
	j := 0
	for i, v := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hexdigits[v>>4], hexdigits[v&0xf]
		j += 2
	}
	return string(b[:])
}

func parseUUID(s string) ([16]byte, error) {
	var id [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("%q is not a canonical UUID", s)
	}
	j := 0
	for i := 0; i < len(s); {
		if s[i] == '-' {
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return [16]byte{}, fmt.Errorf("%q has a non-hex digit", s)
		}
		id[j] = hi<<4 | lo
		j++
		i += 2
	}
	return id, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
