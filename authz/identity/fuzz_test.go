package identity

import (
	"context"
	"net/http"
	"testing"
)

// FuzzIdentify feeds arbitrary Authorization headers to a Resolver with a JWT issuer
// and a static token file: Identify must never panic, and must return Anonymous()
// whenever it returns an error.
func FuzzIdentify(f *testing.F) {
	r, tok := benchResolver(f)
	static, err := New(Config{StaticTokensFile: testdata + "static_tokens.yaml"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(static.Close)
	for _, s := range []string{
		"Bearer " + tok, "Bearer " + tok[:len(tok)-4], "Bearer dev-token-kyc", "Basic x", "Bearer ", "bearer a.b.c",
		"Bearer eyJhbGciOiJub25lIn0.e30.", "Bearer e30.e30.e30", "Bearer bnVsbA.e30.", "Bearer ....",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, auth string) {
		for _, res := range []*Resolver{r, static} {
			c, err := res.Identify(context.Background(), Credentials{Header: http.Header{"Authorization": {auth}}})
			if err != nil && (c.Authenticated || c.Method != MethodAnonymous) {
				t.Fatalf("error %v with caller %+v", err, c)
			}
			if err == nil && c.Authenticated && c.AgentID == "" {
				t.Fatalf("authenticated caller without agent: %+v", c)
			}
		}
	})
}
