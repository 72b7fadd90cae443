package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// maxReviewSize is the largest AdmissionReview read, controller-runtime's limit: the apiserver's
// own request limit (3 MiB of object) twice over (object and oldObject), with room to spare.
const maxReviewSize = 7 << 20

// Versions of AdmissionReview a reviewServer answers. The configurations ask for v1 only; v1beta1
// has the same shape and is answered in kind, as controller-runtime does.
var reviewVersions = map[string]bool{
	admissionv1.SchemeGroupVersion.String(): true,
	"admission.k8s.io/v1beta1":              true,
}

// reviewServer serves one admission.Handler over HTTP: it reads the AdmissionReview, calls the
// handler and writes its answer. It does what controller-runtime's admission.Webhook does for a
// JSON AdmissionReview (the body limit, the content type, panic recovery, Response.Complete) in one
// decode of the body. controller-runtime's generic decoder parses every body twice (once to read
// its apiVersion and kind, once to decode it), which was half of the webhook server's CPU per
// request; the handlers then decode the object itself once more.
type reviewServer struct {
	handler admission.Handler
	log     logr.Logger
}

// NewAdmissionWebhook wraps h as Setup serves every handler (reviewServer). Benchmarks serve their
// no-op baseline through it too, so they compare handlers, not plumbing.
func NewAdmissionWebhook(h admission.Handler) http.Handler {
	return &reviewServer{handler: h, log: logf.Log.WithName("admission")}
}

// bodyBuffers recycles request bodies: a review is read whole before it is decoded.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ServeHTTP implements http.Handler.
func (s *reviewServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 1<<20 { // a rare huge review is not kept
			bodyBuffers.Put(buf)
		}
	}()
	apiVersion, req, status, err := s.read(r, buf)
	if err != nil {
		s.log.Error(err, "bad admission request", "path", r.URL.Path)
		s.write(w, apiVersion, admission.Errored(status, err))
		return
	}
	s.write(w, apiVersion, s.handle(r.Context(), req))
}

// read reads and decodes the AdmissionReview into buf and returns its apiVersion and request, or
// the HTTP status and error to answer with.
func (s *reviewServer) read(r *http.Request, buf *bytes.Buffer) (string, admission.Request, int32, error) {
	v1 := admissionv1.SchemeGroupVersion.String()
	if r.Body == nil || r.Body == http.NoBody {
		return v1, admission.Request{}, http.StatusBadRequest, errors.New("request body is empty")
	}
	defer func() { _ = r.Body.Close() }()
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return v1, admission.Request{}, http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct)
	}
	if r.ContentLength > 0 && r.ContentLength <= maxReviewSize {
		buf.Grow(int(r.ContentLength) + bytes.MinRead) // ReadFrom wants MinRead free to stop at EOF
	}
	n, err := buf.ReadFrom(io.LimitReader(r.Body, maxReviewSize+1))
	switch {
	case err != nil:
		return v1, admission.Request{}, http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)
	case n > maxReviewSize:
		return v1, admission.Request{}, http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", maxReviewSize)
	}
	var ar admissionv1.AdmissionReview
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(buf.Bytes(), &ar); err != nil {
		return v1, admission.Request{}, http.StatusBadRequest, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	// A review without apiVersion and kind is read as v1, as controller-runtime reads it.
	apiVersion := ar.APIVersion
	if apiVersion == "" {
		apiVersion = v1
	}
	switch {
	case !reviewVersions[apiVersion] || ar.Kind != "" && ar.Kind != "AdmissionReview":
		return v1, admission.Request{}, http.StatusBadRequest, fmt.Errorf("the body is %s %s, not an AdmissionReview of admission.k8s.io/v1", ar.APIVersion, ar.Kind)
	case ar.Request == nil:
		return apiVersion, admission.Request{}, http.StatusBadRequest, errors.New("the AdmissionReview carries no request")
	}
	return apiVersion, admission.Request{AdmissionRequest: *ar.Request}, 0, nil
}

// handle runs the handler with the server's logger in ctx and completes its response; a panic is
// answered with a 500 and counted.
func (s *reviewServer) handle(ctx context.Context, req admission.Request) (resp admission.Response) {
	defer func() {
		if r := recover(); r != nil {
			webhookPanics.Inc()
			for _, fn := range utilruntime.PanicHandlers {
				fn(ctx, r)
			}
			resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", r))
			resp.UID = req.UID
		}
	}()
	resp = s.handler.Handle(logr.NewContext(ctx, s.log), req)
	if err := resp.Complete(req); err != nil {
		s.log.Error(err, "unable to encode the response", "requestID", req.UID)
		resp = admission.Errored(http.StatusInternalServerError, errors.New("unable to encode the response"))
		resp.UID = req.UID
	}
	return resp
}

// write answers with resp in an AdmissionReview of apiVersion.
func (s *reviewServer) write(w http.ResponseWriter, apiVersion string, resp admission.Response) {
	out, err := json.Marshal(admissionv1.AdmissionReview{Response: &resp.AdmissionResponse,
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"}})
	if err != nil { // a response is plain data: only a broken handler gets here
		s.log.Error(err, "unable to encode the AdmissionReview", "requestID", resp.UID)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(out); err != nil {
		s.log.V(1).Info("unable to write the response", "requestID", resp.UID, "error", err.Error())
	}
}
