// Package billing computes what AWS would bill for the requests a program
// makes, where the local emulator cannot say: moto reports a
// ConsumedCapacity of 1 for every DynamoDB request whatever the item size
// (see internal/moto/NOTES.md). Meter is an aws-sdk-go-v2 DynamoDB middleware
// that applies DynamoDB's capacity rules to every request; SQSCounter is an
// SQS middleware that counts requests per API and queue, and the 64 KB
// chunks SQS bills them by.
package billing

import (
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ItemSize returns an item's size as DynamoDB counts it for capacity units:
// the sum over its attributes of the name's UTF-8 length plus the value's
// size (see AttributeSize).
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + AttributeSize(v)
	}
	return n
}

// AttributeSize returns the size of one value without its name, by
// DynamoDB's documented rules ("Item sizes and formats"):
//   - string: its UTF-8 bytes; binary: its raw bytes;
//   - number: 1 byte per two significant digits (leading and trailing zeroes
//     trimmed), plus 1 byte, plus 1 more for a negative number;
//   - boolean, null: 1 byte;
//   - list, map: 3 bytes, plus per element 1 byte and the element's size
//     (a map element's size includes its name);
//   - sets: the sum of their elements' sizes.
func AttributeSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return NumberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + AttributeSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for name, e := range v.Value {
			n += 1 + len(name) + AttributeSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += NumberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	}
	return 0
}

// NumberSize is the stored size of a number in its decimal string form:
// ceil(significant digits / 2) + 1, plus 1 for a negative number.
func NumberSize(s string) int {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i] // the exponent moves the point, it adds no digit
	}
	digits := strings.Replace(s, ".", "", 1)
	digits = strings.TrimLeft(digits, "0")
	digits = strings.TrimRight(digits, "0")
	sig := utf8.RuneCountInString(digits)
	if sig == 0 {
		sig = 1 // zero
	}
	n := (sig+1)/2 + 1
	if neg {
		n++
	}
	return n
}
