package wire

import "testing"

func TestHeaderValueAndToken(t *testing.T) {
	for v, want := range map[string]bool{
		"tok-1": true, "Bearer abc.def=": true, "a b": true, "~!$%": true,
		"": false, " a": false, "a ": false, "a\tb": false, "a\r\nb": false, "a\x00": false, "a\x7f": false,
		"tökén": false, "\u2028": false, "\xff": false,
	} {
		if got := HeaderValue(v); got != want {
			t.Errorf("HeaderValue(%q) = %v, want %v", v, got, want)
		}
	}
	for v, want := range map[string]bool{
		"Bearer": true, "Basic": true, "x-custom.v1": true, "a!#$%&'*+-.^_`|~9": true,
		"": false, "Bea rer": false, "Bearer,": false, "a/b": false, "Béarer": false, "a\"": false,
	} {
		if got := HeaderToken(v); got != want {
			t.Errorf("HeaderToken(%q) = %v, want %v", v, got, want)
		}
	}
}
