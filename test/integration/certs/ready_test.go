package certs

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperbatch/hyperbatch/certs"
)

const rotatorUser = "hyperbatch-rotator-ready-test"

// rotatorRBAC gives rotatorUser what the rotator needs, and takes its writes away on demand, so the
// test can keep the rotator from repairing a certificate the way an apiserver outage or a broken
// role binding would.
type rotatorRBAC struct {
	t      *testing.T
	prefix string
}

func newRotatorRBAC(t *testing.T, prefix string) (*rotatorRBAC, client.WithWatch) {
	t.Helper()
	r := &rotatorRBAC{t: t, prefix: prefix}
	ctx := context.Background()
	objs := []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: prefix}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: prefix},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: prefix},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: rotatorUser}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: prefix}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: prefix},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: prefix},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: rotatorUser}}},
	}
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, o := range objs {
			_ = k8s.Delete(context.Background(), o)
		}
	})
	r.set(true)
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: rotatorUser, Groups: []string{"system:authenticated"}}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return r, c
}

// set grants (writes true) or takes away the rotator's writes, and waits until the authorizer agrees.
func (r *rotatorRBAC) set(writes bool) {
	r.t.Helper()
	ctx := context.Background()
	secretVerbs, configVerbs := []string{"get", "list", "watch"}, []string{"get", "list", "watch"}
	if writes {
		secretVerbs = append(secretVerbs, "create", "update")
		configVerbs = append(configVerbs, "patch")
	}
	role := &rbacv1.Role{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: r.prefix}, role); err != nil {
		r.t.Fatal(err)
	}
	role.Rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: secretVerbs}}
	cr := &rbacv1.ClusterRole{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: r.prefix}, cr); err != nil {
		r.t.Fatal(err)
	}
	cr.Rules = []rbacv1.PolicyRule{
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, Verbs: configVerbs},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	for _, o := range []client.Object{role, cr} {
		if err := k8s.Update(ctx, o); err != nil {
			r.t.Fatal(err)
		}
	}
	eventually(r.t, "the authorizer seeing the rotator's new role", func() (bool, error) {
		for _, a := range []authorizationv1.ResourceAttributes{
			{Namespace: namespace, Verb: "update", Resource: "secrets"},
			{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"},
		} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: rotatorUser, ResourceAttributes: &a}}
			if err := k8s.Create(ctx, sar); err != nil || sar.Status.Allowed != writes {
				return false, err
			}
		}
		return true, nil
	})
}

// waitReady waits until the manager's /readyz and the rotator's check both pass.
func waitReady(t *testing.T, s *server, timeout time.Duration) {
	t.Helper()
	_ = readiness(t, s, true, timeout)
}

// waitNotReady waits until the manager's /readyz and the rotator's check both fail, and returns the
// check's error.
func waitNotReady(t *testing.T, s *server) error {
	t.Helper()
	return readiness(t, s, false, 30*time.Second)
}

func readiness(t *testing.T, s *server, ready bool, timeout time.Duration) error {
	t.Helper()
	var checkErr error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := s.ready()
		checkErr = s.rot.Checker()(&http.Request{})
		return err == nil && ok == ready && (checkErr == nil) == ready, nil
	})
	if err != nil {
		t.Fatalf("readiness did not become %v within %s (check: %v)", ready, timeout, checkErr)
	}
	return checkErr
}

// TestReadinessFollowsServedCertificate: after the first sync, /readyz still fails whenever the served
// certificate is not yet valid, expired, or not trusted by a webhook configuration's caBundle and the
// rotator cannot repair it (its writes are taken away), and passes again once it has.
func TestReadinessFollowsServedCertificate(t *testing.T) {
	const prefix = "ready"
	rbac, c := newRotatorRBAC(t, prefix)
	s := serve(t, prefix, certs.WithClient(c))
	st := readState(t, s.cfg.SecretName)
	issued := s.fc.Now()

	// A clock behind the certificate's NotBefore (readiness reads the clock on every check).
	s.fc.SetTime(st.serving.NotBefore.Add(-time.Minute))
	err := waitNotReady(t, s)
	if !strings.Contains(err.Error(), "is not valid before") {
		t.Fatalf("not-yet-valid certificate reported as %v", err)
	}
	s.fc.SetTime(issued)
	waitReady(t, s, 30*time.Second)

	// Expired while the rotator cannot write the renewed certificate.
	rbac.set(false)
	s.fc.SetTime(st.serving.NotAfter.Add(time.Minute))
	err = waitNotReady(t, s)
	if !strings.Contains(err.Error(), "expired at") {
		t.Fatalf("expired certificate reported as %v", err)
	}
	rbac.set(true) // the rotator's retry (back-off up to 30s) renews it
	waitReady(t, s, 90*time.Second)
	if renewed := readState(t, s.cfg.SecretName); sameSerial(renewed.serving, st.serving) {
		t.Fatal("ready again without a renewed certificate")
	}

	// A caBundle that does not verify the served certificate, which the rotator cannot repair.
	rbac.set(false)
	other, err := certs.NewCA("someone-else", s.fc.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: prefix + "-validating"}, v); err != nil {
		t.Fatal(err)
	}
	v.Webhooks[0].ClientConfig.CABundle = other.CertPEM()
	if err := k8s.Update(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	err = waitNotReady(t, s)
	if !strings.Contains(err.Error(), "not trusted by the webhook configurations' caBundle") {
		t.Fatalf("untrusted certificate reported as %v", err)
	}
	rbac.set(true)
	waitReady(t, s, 90*time.Second)
}
