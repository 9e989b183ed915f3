package console

import (
	"errors"
	"net/http"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// CookieName is the console session cookie. It is sent only under
// /console; the API refuses any request that presents cookies instead of
// a key.
const CookieName = "caduceus_console"

// session returns the request's valid session. A session of a key is valid
// only while the key exists, is not revoked and still belongs to the
// session's tenant: revoking the key ends its console sessions.
func (c *Console) session(r *http.Request) (claims, bool) {
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return claims{}, false
	}
	cl, err := open(c.sessionKey, sessionPrefix, ck.Value, c.cfg.Now())
	if err != nil {
		return claims{}, false
	}
	if cl.AllTenants {
		return cl, true
	}
	return cl, c.keyActive(r, cl.Login) == nil
}

var (
	errKeyInactive = errors.New("the key this link was made for is revoked, gone, or in another tenant now")
	errUsed        = errors.New("the link was already used: each login link works once")
)

func (c *Console) keyActive(r *http.Request, l Login) error {
	k, err := c.cfg.DB.Keys().Key(r.Context(), l.KeyID)
	if err != nil {
		if contract.AsError(err).Kind == contract.KindNotFound {
			return errKeyInactive
		}
		return err
	}
	if k.RevokedAt != nil || k.Tenant != l.Tenant {
		return errKeyInactive
	}
	return nil
}

// login redeems a one-time login token: signature, expiry, the key (for a
// tenant login), then the nonce, recorded in the store so the token works
// once across every process on the database. It sets the session cookie
// and sends the browser on with a page of its own origin (a meta refresh),
// so the first console request is same-site and carries the SameSite=Strict
// cookie even when the link was opened from another site.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	now := c.cfg.Now()
	cl, err := open(c.loginKey, tokenPrefix, r.URL.Query().Get("token"), now)
	if err == nil && !cl.AllTenants {
		err = c.keyActive(r, cl.Login)
	}
	if err == nil {
		var first bool
		first, err = c.cfg.DB.Console().RedeemLogin(r.Context(), cl.Nonce, cl.Tenant, time.Unix(cl.Expires, 0))
		if err == nil && !first {
			err = errUsed
		}
	}
	if err != nil {
		switch {
		case errors.Is(err, errMalformed), errors.Is(err, errForged), errors.Is(err, errExpired), errors.Is(err, errKeyInactive), errors.Is(err, errUsed):
			c.log.Info("console login refused", "reason", err.Error(), "remote", r.RemoteAddr)
			c.unauthorized(w, err.Error()+".")
		default:
			c.log.Error("console login failed", "err", err)
			c.render(w, http.StatusInternalServerError, "error", view{Title: "Error"}, errorView{Message: "The login could not be checked; the server log says why."})
		}
		return
	}
	exp := now.Add(c.cfg.SessionTTL)
	value, err := sign(c.sessionKey, sessionPrefix, claims{Login: cl.Login, Nonce: nonce(), Expires: exp.Unix()})
	if err != nil {
		c.render(w, http.StatusInternalServerError, "error", view{Title: "Error"}, errorView{Message: "The session could not be made."})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: value, Path: "/console", Expires: exp, MaxAge: int(c.cfg.SessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	who := "tenant " + string(cl.Tenant) + " (key " + cl.KeyID + ")"
	if cl.AllTenants {
		who = "every tenant"
	}
	c.log.Info("console login", "tenant", cl.Tenant, "key", cl.KeyID, "all_tenants", cl.AllTenants, "remote", r.RemoteAddr)
	c.render(w, http.StatusOK, "signedin", view{Title: "Signed in"}, who)
}

// logout clears the session cookie. A POST with SameSite=Strict: another
// site cannot sign an operator out.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/console", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	c.unauthorized(w, "Signed out.")
}

// unauthorized answers 401 with how to sign in.
func (c *Console) unauthorized(w http.ResponseWriter, reason string) {
	c.render(w, http.StatusUnauthorized, "signin", view{Title: "Sign in"}, reason)
}
