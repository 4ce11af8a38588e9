package proxy

import (
	"fmt"
	"net/url"
	"slices"

	"github.com/writ-authz/writ/task"
)

// strictQuery is the request's query as every reader behind writ reads it,
// or the refusal of a query they would read differently. The query is
// forwarded as sent, so writ decides on the raw string, not on a lenient
// parse of it: net/http's URL.Query drops a pair it cannot decode (a bad
// escape, a semicolon), which Node's querystring (the JS SDK's Express)
// decodes anyway, so "?tenant=retail%" would be no tenant to writ and
// "retail%" to the agent. A parameter named twice is refused too: Express
// makes it an array, Go takes the first, FastAPI (the ACP reference server)
// the last. Without a raw query (a door that has only the parsed one) the
// parsed values are checked for repeats alike.
func strictQuery(inc Incoming) (url.Values, *task.Fault) {
	q := inc.Query
	if inc.RawQuery != "" {
		parsed, err := url.ParseQuery(inc.RawQuery)
		if err != nil {
			return inc.Query, task.NewFault(task.KindInvalidParams, "the query string is malformed: "+err.Error())
		}
		q = parsed
	}
	var repeated []string
	for name, vs := range q {
		if len(vs) > 1 {
			repeated = append(repeated, name)
		}
	}
	if len(repeated) > 0 {
		slices.Sort(repeated)
		return q, task.NewFault(task.KindInvalidParams,
			fmt.Sprintf("query parameter %q is given more than once; name each parameter once", repeated[0]))
	}
	return q, nil
}
