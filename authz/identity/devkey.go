package identity

import (
	"fmt"
	"sort"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
)

// writ's development identity (internal/devidp, `writ dev token` and `writ dev
// jwks`) signs any caller for anyone who has its key directory. A
// configuration that accepts it is a development configuration: writ
// validate warns about it (and -strict fails), and writ serve logs a warning
// at start and on every reload while it does.
const (
	// DevelopmentIssuer is the iss of the development identity's tokens.
	// `writ dev token` signs for it (or a name that starts with it and a
	// dash) and for no other issuer.
	DevelopmentIssuer = "writ-dev"
	// DevelopmentKeyID is the kid of the development identity's key, in its
	// JWKS and in every token it signs: what identifies the key wherever its
	// JWKS was copied.
	DevelopmentKeyID = "writ-dev-1"
	// legacyDevelopmentKeyID is the kid the development key had before it
	// carried writ's name; JWKS files written then still hold it.
	legacyDevelopmentKeyID = "dev-1"
)

// IsDevelopmentIssuer reports whether an issuer name is the development
// identity's: DevelopmentIssuer, or it followed by a dash and a suffix.
func IsDevelopmentIssuer(name string) bool {
	return name == DevelopmentIssuer || strings.HasPrefix(name, DevelopmentIssuer+"-")
}

// IsDevelopmentKey reports whether a key is the development identity's, by
// its kid.
func IsDevelopmentKey(k jose.JSONWebKey) bool {
	return k.KeyID == DevelopmentKeyID || k.KeyID == legacyDevelopmentKeyID
}

// DevelopmentUse is one way a configuration accepts the development
// identity: Key is the configuration key (identity.jwt[0].jwks_file, ...),
// Msg says what.
type DevelopmentUse struct {
	Key, Msg string
}

// DevelopmentUses lists how this resolver accepts the development identity:
// issuers named as it, and its key among an issuer's keys (a JWKS file's, or
// those fetched so far from a JWKS URL). Empty for a production
// configuration.
func (r *Resolver) DevelopmentUses() []DevelopmentUse {
	var out []DevelopmentUse
	for _, iss := range r.issuers {
		if IsDevelopmentIssuer(iss.name) {
			out = append(out, DevelopmentUse{Key: iss.key + ".issuer", Msg: fmt.Sprintf(
				"%q is the issuer of writ's development identity (writ dev token): anyone with its key directory signs any caller", iss.name)})
		}
		if iss.keys == nil {
			continue
		}
		snap := iss.keys.cur.Load()
		if snap == nil {
			continue
		}
		for _, k := range snap.keys {
			if IsDevelopmentKey(k) {
				src, where := iss.key+".jwks_file", "its JWKS file"
				if iss.keys.url != "" {
					src, where = iss.key+".jwks_url", "its JWKS URL"
				}
				out = append(out, DevelopmentUse{Key: src, Msg: fmt.Sprintf(
					"%s holds writ's development key (kid %q): anyone with the key directory of writ dev signs any caller as %s",
					where, k.KeyID, iss.name)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
