package assign

import (
	"errors"
	"regexp"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

var clusterTopics = []string{
	"orders", "orders-v2", "reorders", "payments", "a.b", "axb", "ab", "a",
	"__consumer_offsets", "__transaction_state", "orders",
}

func TestSubscriptionsMatchWholeTopicNames(t *testing.T) {
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		// Whole names, as Pattern.matcher(name).matches(): no prefix or
		// substring matches.
		{"orders", []string{"orders"}},
		{"orders.*", []string{"orders", "orders-v2"}},
		{".*orders", []string{"orders", "reorders"}},
		{"^orders$", []string{"orders"}},
		// Leftmost-first would stop at "a" in "ab"; a whole match exists.
		{"a|ab", []string{"a", "ab"}},
		// A \Q without \E quotes to the end; anchoring must not swallow it.
		{`\Qa.b`, []string{"a.b"}},
		{`a\.b`, []string{"a.b"}},
		{"a.b", []string{"a.b", "axb"}},
		// An inline flag stays inside the pattern.
		{"(?i)ORDERS", []string{"orders"}},
		// Kafka's coordinator excludes no internal topic.
		{"__.*", []string{"__consumer_offsets", "__transaction_state"}},
		{".*", []string{"__consumer_offsets", "__transaction_state", "a", "a.b", "ab", "axb", "orders", "orders-v2", "payments", "reorders"}},
		{"", nil},
		{"nothing", nil},
	} {
		re, err := CompileSubscription(c.pattern)
		if err != nil {
			t.Errorf("CompileSubscription(%q): %v", c.pattern, err)
			continue
		}
		if got := MatchTopics(re, clusterTopics); !slices.Equal(got, c.want) {
			t.Errorf("%q matched %q, want %q", c.pattern, got, c.want)
		}
		for _, name := range c.want {
			if !re.MatchString(name) {
				t.Errorf("%q: MatchString(%q) is false; the compiled expression itself must be anchored", c.pattern, name)
			}
		}
	}
}

func TestMatchTopicsHoldsUnanchoredExpressionsToWholeNames(t *testing.T) {
	got := MatchTopics(regexp.MustCompile("orders"), clusterTopics)
	if !slices.Equal(got, []string{"orders"}) {
		t.Errorf("an unanchored orders matched %q", got)
	}
}

func TestInvalidSubscriptionIsInvalidRegularExpression(t *testing.T) {
	for _, pattern := range []string{"(", "[a-", "a{2,1}", `(?<!x)a`, `\1`, "*", "a{1001}"} {
		_, err := CompileSubscription(pattern)
		var invalid *InvalidRegexError
		if !errors.As(err, &invalid) {
			t.Errorf("CompileSubscription(%q) = %v, want an *InvalidRegexError", pattern, err)
			continue
		}
		if invalid.Code() != 128 || !errors.Is(err, kerr.InvalidRegularExpression) {
			t.Errorf("%q: code %d, errors.Is(InvalidRegularExpression) %v; want 128 and true", pattern, invalid.Code(), errors.Is(err, kerr.InvalidRegularExpression))
		}
		if invalid.Pattern != pattern {
			t.Errorf("error names pattern %q, want %q", invalid.Pattern, pattern)
		}
	}
}

// TestUnanchoredCompileWouldFail shows what the tests above guard against:
// Go's regexp searches, Java's matches() does not.
func TestUnanchoredCompileWouldFail(t *testing.T) {
	if !regexp.MustCompile("orders").MatchString("reorders") {
		t.Fatal("Go's MatchString no longer searches; the anchoring above is moot")
	}
	re, _ := CompileSubscription("orders")
	if re.MatchString("reorders") {
		t.Error("CompileSubscription(orders) matches reorders")
	}
}
