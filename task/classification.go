package task

import "fmt"

// Level is a data classification level. The order is fixed here because adapters
// must pick the highest level a request declares; policies read the same order
// from their data document.
type Level string

// The classification levels, lowest first.
const (
	Public       Level = "public"
	Internal     Level = "internal"
	Confidential Level = "confidential"
	Restricted   Level = "restricted"
)

// Levels lists the levels from lowest to highest.
var Levels = []Level{Public, Internal, Confidential, Restricted}

// Rank is the position of l in Levels, or -1 for an unknown or empty level.
func (l Level) Rank() int {
	for i, v := range Levels {
		if v == l {
			return i
		}
	}
	return -1
}

// ParseLevel returns the level named s, or an error naming the known levels.
func ParseLevel(s string) (Level, error) {
	l := Level(s)
	if l.Rank() < 0 {
		return "", fmt.Errorf("unknown data classification %q (known: public, internal, confidential, restricted)", s)
	}
	return l, nil
}

// Max returns the higher of two levels; an empty level counts as lowest.
func Max(a, b Level) Level {
	if b.Rank() > a.Rank() {
		return b
	}
	return a
}
