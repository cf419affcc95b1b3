# tools/: the fabsock launcher, its man page and the library's man page.
#
# The launcher is a shell script generated from tools/fabsock.in with the
# configured paths substituted here (not by configure) so that
# `make prefix=... install` and `make libdir=...` overrides take effect.
bin_SCRIPTS += tools/fabsock
CLEANFILES += tools/fabsock
EXTRA_DIST += tools/fabsock.in
dist_man_MANS += man/fabsock.1 man/fabsock.7 man/fabsock-ovs.1
# fabsock-ovs: sets up a pool of vhost-user ports on an OVS bridge.
dist_bin_SCRIPTS = tools/fabsock-ovs

tools/fabsock: $(top_srcdir)/tools/fabsock.in Makefile
	$(AM_V_GEN)$(MKDIR_P) tools && \
	rm -f $@ $@.tmp && \
	sed -e 's|@VERSION[@]|$(VERSION)|g' \
	    -e 's|@libdir[@]|$(libdir)|g' \
	    -e 's|@fiprovdir[@]|$(fiprovdir)|g' \
	    $(top_srcdir)/tools/fabsock.in >$@.tmp && \
	chmod +x $@.tmp && mv $@.tmp $@

# fabsock-stat: the processes running libfabsock and their sockets, read
# from their statistics segments (src/stack/stk_stat.h).
bin_PROGRAMS += tools/fabsock-stat
tools_fabsock_stat_SOURCES = tools/fabsock-stat.c src/stack/stk_stat.h
dist_man_MANS += man/fabsock-stat.1
