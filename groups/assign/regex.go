package assign

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// InvalidRegexError is a subscribed_topic_regex that does not compile. Its
// Code is INVALID_REGULAR_EXPRESSION (128), which Kafka answers
// ConsumerGroupHeartbeat with (Utils.throwIfRegularExpressionIsInvalid).
type InvalidRegexError struct {
	Pattern string
	Err     error
}

func (e *InvalidRegexError) Error() string {
	return fmt.Sprintf("SubscribedTopicRegex `%s` is not a valid regular expression: %v", e.Pattern, e.Err)
}

// Unwrap returns kerr.InvalidRegularExpression, so errors.Is and kerr's
// helpers see the Kafka error.
func (e *InvalidRegexError) Unwrap() []error { return []error{kerr.InvalidRegularExpression, e.Err} }

// Code is the Kafka error code to answer with.
func (e *InvalidRegexError) Code() int16 { return kerr.InvalidRegularExpression.Code }

// CompileSubscription compiles a KIP-848 subscribed_topic_regex. Kafka
// compiles it with RE2/J and tests a topic with matcher(name).matches(),
// which must match the whole name: "orders" names the topic orders alone,
// "orders.*" every topic starting with it. Go's regexp is RE2 too; the
// returned expression is anchored at both ends, so MatchString (and
// MatchTopics) test whole names as Kafka does. The pattern is anchored on
// its parse tree, not by pasting ^(?: and )$ around its text, which a
// trailing \Q without \E would swallow. An invalid pattern is an
// *InvalidRegexError.
//
// The returned expression's String is the anchored form; keep the pattern
// itself to persist or report it. An empty pattern compiles and matches no
// topic (no topic name is empty); Kafka treats an empty regex as none, and
// so should the caller.
//
// Dialects: RE2/J and Go's RE2 share the syntax (no backreferences, no
// lookaround, the same repetition limit) but may disagree at the edges,
// such as the spellings of named groups and some Unicode classes. Topic
// names are ASCII letters, digits, '.', '_' and '-', on which the common
// classes (\d, \w, \s, \b, [[:alpha:]]) agree.
func CompileSubscription(pattern string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, &InvalidRegexError{Pattern: pattern, Err: err}
	}
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, &InvalidRegexError{Pattern: pattern, Err: err}
	}
	anchored := &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{
		{Op: syntax.OpBeginText}, tree, {Op: syntax.OpEndText},
	}}
	re, err := regexp.Compile(anchored.String())
	if err != nil {
		return nil, &InvalidRegexError{Pattern: pattern, Err: err}
	}
	return re, nil
}

// MatchTopics returns the topics whose whole name re matches, sorted and
// without duplicates. re is held to whole names even if it is not anchored
// (one compilation per call, so a plain regexp.MustCompile("orders") cannot
// match "reorders" by accident).
//
// Internal topics are not excluded, because Kafka's coordinator does not
// exclude them: GroupMetadataManager.refreshRegularExpressions matches every
// topic name of the metadata image, and only a DESCRIBE authorization
// filter follows. ".*" therefore names __consumer_offsets too. Clients
// filter on their side (the Java consumer's exclude.internal.topics applies
// to the classic protocol only; franz-go skips internal topics itself).
func MatchTopics(re *regexp.Regexp, topics []string) []string {
	if whole, err := CompileSubscription(re.String()); err == nil {
		re = whole
	}
	var out []string
	for _, name := range topics {
		if re.MatchString(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
