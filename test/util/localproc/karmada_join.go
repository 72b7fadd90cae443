package localproc

import (
	"context"
	"fmt"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// memberTokenTTL is how long the token Karmada uses for a member lasts.
const memberTokenTTL = 30 * 24 * time.Hour

// JoinMember registers a member cluster with a Karmada plane in Push mode, as `karmadactl join` does: in the
// member, a ServiceAccount karmada-<name> in karmada-cluster bound to a ClusterRole that allows
// everything (Karmada applies any kind and impersonates users for its cluster proxy) and a token for
// it; in the plane, the Secret karmada-cluster/<name> (token, caBundle), the impersonator Secret
// karmada-cluster/<name>-impersonator (token) and the Cluster <name> (syncMode Push, apiEndpoint,
// secretRef, impersonatorSecretRef, and the member's kube-system UID as id). member must be an
// administrator's config of the member, plane a client of the Karmada apiserver; a name or member
// already joined is refused.
func JoinMember(ctx context.Context, plane client.Client, name string, member *rest.Config) error {
	cs, err := kubernetes.NewForConfig(member)
	if err != nil {
		return fmt.Errorf("join %s: client for the member: %w", name, err)
	}
	// The member's identity, as karmadactl join takes it: the UID of its kube-system namespace.
	ks, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("join %s: reading the member's kube-system namespace (its cluster ID): %w", name, err)
	}
	id := string(ks.UID)
	var clusters clusterv1alpha1.ClusterList
	if err := plane.List(ctx, &clusters); err != nil {
		return fmt.Errorf("join %s: listing the plane's Clusters: %w", name, err)
	}
	for _, c := range clusters.Items {
		if c.Name == name || c.Spec.ID == id {
			return fmt.Errorf("join %s: Cluster %s (id %s) is already registered for this name or member; unjoin it first", name, c.Name, c.Spec.ID)
		}
	}
	sa := "karmada-" + name
	role := "karmada-controller-manager:" + sa
	for _, create := range []func() error{
		func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KarmadaClusterNamespace}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(KarmadaClusterNamespace).Create(ctx,
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: KarmadaClusterNamespace, Name: sa}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: role},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
					{NonResourceURLs: []string{"*"}, Verbs: []string{"get"}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: KarmadaClusterNamespace, Name: sa}},
			}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("join %s: preparing the member's ServiceAccount %s/%s: %w", name, KarmadaClusterNamespace, sa, err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(KarmadaClusterNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(memberTokenTTL.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("join %s: requesting a token for %s/%s in the member: %w", name, KarmadaClusterNamespace, sa, err)
	}
	caBundle := member.CAData
	if len(caBundle) == 0 {
		return fmt.Errorf("join %s: the member's config has no CA data (CAData); Karmada needs the member's CA as caBundle", name)
	}
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: KarmadaClusterNamespace, Name: name},
			Data: map[string][]byte{clusterv1alpha1.SecretTokenKey: []byte(tr.Status.Token), clusterv1alpha1.SecretCADataKey: caBundle}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: KarmadaClusterNamespace, Name: name + "-impersonator"},
			Data: map[string][]byte{clusterv1alpha1.SecretTokenKey: []byte(tr.Status.Token)}},
	}
	for _, s := range secrets {
		if err := plane.Create(ctx, s); err != nil {
			return fmt.Errorf("join %s: creating Secret %s/%s on the Karmada apiserver: %w", name, s.Namespace, s.Name, err)
		}
	}
	cluster := &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clusterv1alpha1.ClusterSpec{
			ID:                    id,
			SyncMode:              clusterv1alpha1.Push,
			APIEndpoint:           member.Host,
			SecretRef:             &clusterv1alpha1.LocalSecretReference{Namespace: KarmadaClusterNamespace, Name: name},
			ImpersonatorSecretRef: &clusterv1alpha1.LocalSecretReference{Namespace: KarmadaClusterNamespace, Name: name + "-impersonator"},
		},
	}
	if err := plane.Create(ctx, cluster); err != nil {
		return fmt.Errorf("join %s: creating Cluster %s on the Karmada apiserver: %w", name, name, err)
	}
	return nil
}

// WaitClusterReady waits until Cluster name reports Ready=True on the Karmada apiserver plane
// (Karmada's cluster-status controller reached the member's /readyz with the joined credentials) and
// returns it.
func WaitClusterReady(ctx context.Context, plane client.Client, name string, timeout time.Duration) (*clusterv1alpha1.Cluster, error) {
	cluster := &clusterv1alpha1.Cluster{}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := plane.Get(ctx, client.ObjectKey{Name: name}, cluster); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // keep polling; the last error is reported on timeout
		}
		c := meta.FindStatusCondition(cluster.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
		if c == nil {
			last = "no Ready condition yet"
			return false, nil
		}
		last = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
		return c.Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s is not Ready after %s (last: %s): %w", name, timeout, last, err)
	}
	return cluster, nil
}
