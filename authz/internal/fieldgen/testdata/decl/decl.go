// Package decl holds declarations fieldgen is tried on (testdata: not built).
package decl

import (
	"time"

	"github.com/writ-authz/writ/task"
)

type level string

type good struct {
	Name    string          `json:"name"`
	Level   level           `json:"level,omitempty"`
	Parts   task.PartCounts `json:"parts"`
	Section *section        `json:"section,omitempty"`
	Items   []item          `json:"items"`
	Claims  map[string]any  `json:"claims" writ:"digest=digest"`
	Skipped string          `json:"-"`
	digest  [32]byte
	hidden  string
}

type section struct {
	Tags  []string `json:"tags"`
	Count int64    `json:"count"`
}

type item struct {
	ID string `json:"id"`
}

type noTag struct {
	A string
}

type floatMember struct {
	F float64 `json:"f"`
}

type intSlice struct {
	I []int `json:"i"`
}

type stringMap struct {
	M map[string]string `json:"m"`
}

type embedded struct {
	item
}

type custom struct{ V string }

func (custom) MarshalJSON() ([]byte, error) { return nil, nil }

type marshaler struct {
	C custom `json:"c"`
}

type outside struct {
	T time.Time `json:"t"`
}

type badOption struct {
	A string `json:"a,string"`
}

type dupName struct {
	A string `json:"a"`
	B string `json:"a"`
}

type badWrit struct {
	A string `json:"a" writ:"memo"`
}

type badDigest struct {
	M map[string]any `json:"m" writ:"digest=nope"`
}

type mapped struct {
	M map[string]any `json:"m"`
}

type cloneObject struct {
	S mapped `json:"s" writ:"clone"`
}

type rec struct {
	Next *rec `json:"next"`
}

type array struct {
	A [4]string `json:"a"`
}

type emptyName struct {
	A string `json:",omitempty"`
}
