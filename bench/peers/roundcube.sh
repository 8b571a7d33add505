#!/usr/bin/env bash
# Roundcube 1.6 from Debian on loopback, in a directory of its own: nginx
# in front of php-fpm, a SQLite database, IMAP and SMTP on the ports given.
# The system's /etc/roundcube, /etc/nginx and /etc/php are read, never
# changed. Used by run.sh for the webmail rows; usable alone:
#
#   bench/peers/roundcube.sh start DIR HTTP_PORT IMAP_PORT SMTP_PORT [WORKERS]
#   bench/peers/roundcube.sh stop DIR
#
# WORKERS is the number of PHP worker processes (default 10, one per
# benchmark user). nginx compresses text answers, as a production setup
# would. Needs root (packages; workers run as www-data).
set -euo pipefail

die() { printf 'roundcube.sh: %s\n' "$*" >&2; exit 1; }

install_packages() {
    local need=()
    [ -e /usr/share/roundcube/index.php ] || need+=(roundcube roundcube-core)
    [ -e /usr/share/doc/roundcube-sqlite3 ] || need+=(roundcube-sqlite3)
    php -m 2>/dev/null | grep -qx pdo_sqlite || need+=(php-sqlite3)
    ls /usr/sbin/php-fpm* >/dev/null 2>&1 || need+=(php-fpm)
    command -v nginx >/dev/null || need+=(nginx-light)
    if [ ${#need[@]} -gt 0 ]; then
        # No database set-up by dbconfig: this script brings its own.
        echo "roundcube-core roundcube/dbconfig-install boolean false" | debconf-set-selections
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            nginx-light "${need[@]}" >/dev/null
    fi
}

start() {
    local dir=$1 http=$2 imap=$3 smtp=$4 workers=${5:-10}
    install_packages
    local fpm
    fpm=$(ls /usr/sbin/php-fpm* | head -1)
    mkdir -p "$dir/config" "$dir/temp" "$dir/logs" "$dir/nginx"
    # Roundcube reads defaults.inc.php and mimetypes.php from its config
    # directory too.
    cp /etc/roundcube/defaults.inc.php /etc/roundcube/mimetypes.php "$dir/config/"
    cat >"$dir/config/config.inc.php" <<EOF
<?php
\$config = [];
\$config['db_dsnw'] = 'sqlite:///$dir/roundcube.db?mode=0640';
\$config['imap_host'] = '127.0.0.1:$imap';
\$config['smtp_host'] = '127.0.0.1:$smtp';
\$config['smtp_user'] = '';
\$config['smtp_pass'] = '';
\$config['des_key'] = '$(head -c 18 /dev/urandom | base64)';
\$config['temp_dir'] = '$dir/temp/';
\$config['log_dir'] = '$dir/logs/';
\$config['plugins'] = [];
\$config['skin'] = 'elastic';
\$config['enable_spellcheck'] = false;
\$config['enable_installer'] = false;
\$config['username_domain'] = '';
// The benchmark logs in many times a second from one address.
\$config['login_rate_limit'] = 0;
EOF
    cat >"$dir/php-fpm.conf" <<EOF
[global]
pid = $dir/php-fpm.pid
error_log = $dir/logs/php-fpm.log
daemonize = yes
[roundcube]
user = www-data
group = www-data
listen = $dir/php-fpm.sock
listen.owner = www-data
listen.group = www-data
listen.mode = 0666
pm = static
pm.max_children = $workers
env[ROUNDCUBE_CONFIG_DIR] = $dir/config
php_admin_value[error_log] = $dir/logs/php-errors.log
php_admin_value[upload_max_filesize] = 25M
php_admin_value[post_max_size] = 30M
php_admin_value[memory_limit] = 128M
EOF
    cat >"$dir/nginx/nginx.conf" <<EOF
worker_processes 1;
pid $dir/nginx/nginx.pid;
error_log $dir/logs/nginx-error.log;
events { worker_connections 1024; }
http {
    include /etc/nginx/mime.types;
    access_log off;
    client_body_temp_path $dir/nginx/body;
    fastcgi_temp_path $dir/nginx/fastcgi;
    proxy_temp_path $dir/nginx/proxy;
    uwsgi_temp_path $dir/nginx/uwsgi;
    scgi_temp_path $dir/nginx/scgi;
    client_max_body_size 30m;
    keepalive_requests 100000;
    gzip on;
    gzip_types text/css application/javascript application/json text/plain text/xml image/svg+xml;
    server {
        listen 127.0.0.1:$http;
        root /var/lib/roundcube/public_html;
        index index.php;
        location ~ \.php\$ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_param ROUNDCUBE_CONFIG_DIR $dir/config;
            fastcgi_pass unix:$dir/php-fpm.sock;
        }
        location / { try_files \$uri \$uri/ =404; expires 1y; }
    }
}
EOF
    chown -R www-data:www-data "$dir/temp" "$dir/logs"
    chown www-data:www-data "$dir"
    "$fpm" -y "$dir/php-fpm.conf" -R || die "php-fpm did not start (see $dir/logs)"
    nginx -c "$dir/nginx/nginx.conf" || die "nginx did not start (see $dir/logs)"
}

stop() {
    local dir=$1 pid
    for f in "$dir/nginx/nginx.pid" "$dir/php-fpm.pid"; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        kill "$pid" 2>/dev/null || continue
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    done
}

[ "$(id -u)" = 0 ] || die "run as root"
case "${1:-}" in
    start) shift; [ $# -ge 4 ] || die "usage: $0 start DIR HTTP_PORT IMAP_PORT SMTP_PORT [WORKERS]"; start "$@" ;;
    stop) shift; [ $# -eq 1 ] || die "usage: $0 stop DIR"; stop "$1" ;;
    *) die "usage: $0 start|stop DIR ..." ;;
esac
