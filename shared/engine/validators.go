package engine

import (
	"net/http"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// An entry's validators (ETag, Last-Modified) belong to one URL, the one
// they were recorded for (hostqueue.Entry.ValidatorsFor): the URL itself,
// or a redirect target a result reported (result.Result.ValidatorsURL).
// process sends them with that hop's request alone, and a result names the
// URL its own validators belong to, so that sending a result's url, etag,
// lastModified and validatorsUrl back makes the next refetch conditional
// at the hop that answered.

// answerValidators are the validators a result reports for the answer
// resp to req, at redirect hop hop of its entry, and the URL they belong
// to when it is not the entry's own (hop 0). A 304 says the page is
// unchanged, so a validator sent that it does not repeat still holds (RFC
// 9110 has it repeat ETag, not Last-Modified).
func answerValidators(req fetch.Request, resp *fetch.Response, hop int) (etag, lastModified, url string) {
	etag, lastModified = resp.ETag, resp.LastModified
	if resp.HTTPStatus == http.StatusNotModified {
		if etag == "" {
			etag = req.ETag
		}
		if lastModified == "" {
			lastModified = req.LastModified
		}
	}
	if hop > 0 && (etag != "" || lastModified != "") {
		url = req.URL
	}
	return etag, lastModified, url
}

// carryValidators gives a cross-host redirect's target entry next the
// validators ent has not spent (process clears them once sent): recorded
// for a hop still ahead, they go with the chain to its other host.
func carryValidators(ent, next hostqueue.Entry) hostqueue.Entry {
	if ent.ValidatorsURL != "" {
		next.ETag, next.LastModified, next.ValidatorsURL = ent.ETag, ent.LastModified, ent.ValidatorsURL
	}
	return next
}
