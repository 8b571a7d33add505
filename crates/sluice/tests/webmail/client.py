# A webmail client for the integration tests: plain http.client, cookies
# and redirects handled by hand so the test sees exactly what the server
# sends. Imported by the snippets in tests/webmail.rs.
import http.client, re, ssl, sys, urllib.parse

class Web:
    def __init__(self, addr, tls=False):
        host, port = addr.rsplit(":", 1)
        self.host, self.port, self.tls = host, int(port), tls
        self.cookie = None
        self.csrf = None

    def request(self, method, path, form=None, headers=None, raw_body=None):
        if self.tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            c = http.client.HTTPSConnection(self.host, self.port, context=ctx, timeout=30)
        else:
            c = http.client.HTTPConnection(self.host, self.port, timeout=30)
        h = dict(headers or {})
        body = raw_body
        if form is not None:
            body = urllib.parse.urlencode(form)
            h["Content-Type"] = "application/x-www-form-urlencoded"
        if self.cookie:
            h["Cookie"] = self.cookie
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def get(self, path):
        return self.request("GET", path)

    def page(self, path):
        status, h, body = self.get(path)
        assert status == 200, (path, status, body[:300])
        text = body.decode()
        m = re.search(r'name="csrf" value="([^"]+)"', text)
        if m:
            self.csrf = m.group(1)
        return h, text

    def login(self, address, password):
        status, h, body = self.request("POST", "/login", {"address": address, "password": password})
        if status != 303:
            return status, h, body
        set_cookie = h["set-cookie"]
        self.cookie = set_cookie.split(";", 1)[0]
        return status, h, body

    def inbox(self):
        status, h, _ = self.get("/")
        assert status == 303, status
        return h["location"]

    def multipart(self, path, fields, files=()):
        """POSTs multipart/form-data: `fields` (name, value) in order, then
        `files` (name, filename, content type, bytes)."""
        boundary = "----sluicetest7MA4YWxkTrZu0gW"
        parts = []
        for name, value in fields:
            parts.append(("--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n" % (boundary, name, value)).encode())
        for name, filename, ctype, data in files:
            parts.append(("--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\nContent-Type: %s\r\n\r\n" % (boundary, name, filename, ctype)).encode("utf-8") + data + b"\r\n")
        body = b"".join(parts) + ("--%s--\r\n" % boundary).encode()
        return self.request("POST", path, headers={"Content-Type": "multipart/form-data; boundary=" + boundary}, raw_body=body)
