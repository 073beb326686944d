/*
 * The sandbox's init: the program a confined command's process runs between factory's fork and the
 * command's own program. It makes the process's user, mount and network namespaces (or finds them
 * made), builds the view of the file system, adds a Landlock ruleset, drops its capabilities and
 * executes the command. When it makes the namespaces itself (-n), they include a new PID namespace:
 * the init forks once into PID 1 of it, which mounts a fresh /proc, confines itself and forks the
 * command; the process factory started stays as the command's stand-in (same process group, exit
 * status and death by a signal passed on) and PID 1 dies with it, so that the kernel kills
 * everything the command started, daemons included, when factory dies: see run_in_pid_namespace.
 * With namespaces made by the parent (-N) or none, it executes the command in its own place.
 *
 * Why C, with no C library: every confined command pays for this program's start. A Go init costs
 * about 1 ms of runtime start and cannot make a user namespace itself (its process has several
 * threads by then), so it needed util-linux's unshare before it, another program to start; this
 * one is a few kilobytes, single-threaded, and makes the namespaces with one system call
 * (bench/README.md, "Seventh round", has the figures). Without a C library the build is the same
 * for one compiler version on any machine, so TestEmbeddedInitIsFresh can rebuild it and compare.
 *
 * Its command line (package sandbox, plan.args, writes it): options, each a separate argument and
 * the value in the next one, then "--", the command's path and the command's argv:
 *
 *   -n          make user, mount, PID and network namespaces (with -H: no network namespace), and
 *               run the command under an init that is PID 1 of the new PID namespace
 *   -N          namespaces made by the parent, a new PID namespace among them, where the init
 *               mounts a fresh /proc; the capabilities to set them up are ambient
 *   -H          keep the host's network
 *   -c PORT     with -H: a TCP port the command may connect to
 *   -g FD       with a network namespace of the init's (-n or -N, without -H): a unix socket on
 *               which to hand factory a socket listening on 127.0.0.1:PORT (-p) inside it, the
 *               gateway port: factory accepts the command's connections to that port (a socket
 *               belongs to the namespace it was made in), and the command reaches nothing else
 *   -p PORT     with -g: the gateway port
 *   -T DIR      the host's /tmp with symlinks resolved, where a fresh tmpfs is mounted
 *   -t DIR      without namespaces: the private temporary directory, writable
 *   -m DIR      a directory to create in the fresh tmpfs, for HOME
 *   -w PATH     writable (the work tree, HOME)
 *   -r PATH     read-only even inside a writable path (skipped if missing)
 *   -x PATH     hidden: covered by an unreadable empty file or directory
 *   -o DIR      a cache seen copy-on-write: an overlay at DIR over DIR, whose writes go to a tmpfs
 *               no path reaches, gone with the command (skipped if missing; with -n or -N only)
 *   -a N        the kernel's Landlock ABI version
 *   -u PID      factory's pid: the init refuses to run the command for another parent
 *   -q          probe: set everything up, then exit 0 instead of executing the command
 *
 * When it cannot confine or execute the command it prints "factory sandbox: ..." on stderr and
 * exits with 125, as env does.
 */

typedef unsigned long u64;
typedef unsigned int u32;
typedef unsigned short u16;
typedef long i64;

#define FAILED 125

#if defined(__x86_64__)
enum {
	SYS_read = 0, SYS_write = 1, SYS_close = 3, SYS_ioctl = 16, SYS_socket = 41, SYS_execve = 59,
	SYS_getcwd = 79, SYS_chdir = 80, SYS_getuid = 102, SYS_getgid = 104, SYS_getppid = 110,
	SYS_capset = 126, SYS_prctl = 157, SYS_mount = 165, SYS_exit_group = 231, SYS_openat = 257,
	SYS_mkdirat = 258, SYS_unlinkat = 263, SYS_unshare = 272, SYS_statx = 332,
	SYS_rt_sigaction = 13, SYS_rt_sigprocmask = 14, SYS_getpid = 39, SYS_clone = 56, SYS_wait4 = 61,
	SYS_kill = 62, SYS_ppoll = 271, SYS_pipe2 = 293, SYS_umount2 = 166, SYS_fchmodat = 268,
	SYS_sendmsg = 46, SYS_bind = 49, SYS_listen = 50,
};
static i64 sys6(i64 n, i64 a, i64 b, i64 c, i64 d, i64 e, i64 f)
{
	register i64 r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	i64 ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
__asm__(".text\n.global _start\n_start:\n xor %rbp,%rbp\n mov %rsp,%rdi\n and $-16,%rsp\n call start\n hlt\n");
#elif defined(__aarch64__)
enum {
	SYS_getcwd = 17, SYS_ioctl = 29, SYS_mkdirat = 34, SYS_unlinkat = 35, SYS_mount = 40, SYS_chdir = 49,
	SYS_openat = 56, SYS_close = 57, SYS_read = 63, SYS_write = 64, SYS_exit_group = 94, SYS_capset = 91,
	SYS_unshare = 97, SYS_prctl = 167, SYS_getppid = 173, SYS_getuid = 174, SYS_getgid = 176,
	SYS_socket = 198, SYS_execve = 221, SYS_statx = 291,
	SYS_pipe2 = 59, SYS_ppoll = 73, SYS_kill = 129, SYS_rt_sigaction = 134, SYS_rt_sigprocmask = 135,
	SYS_getpid = 172, SYS_clone = 220, SYS_wait4 = 260, SYS_umount2 = 39, SYS_fchmodat = 53,
	SYS_bind = 200, SYS_listen = 201, SYS_sendmsg = 211,
};
static i64 sys6(i64 n, i64 a, i64 b, i64 c, i64 d, i64 e, i64 f)
{
	register i64 x8 __asm__("x8") = n, x0 __asm__("x0") = a, x1 __asm__("x1") = b, x2 __asm__("x2") = c,
		     x3 __asm__("x3") = d, x4 __asm__("x4") = e, x5 __asm__("x5") = f;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory", "cc");
	return x0;
}
__asm__(".text\n.global _start\n_start:\n mov x29, #0\n mov x30, #0\n mov x0, sp\n and sp, x0, #-16\n bl start\n brk #0\n");
#else
#error "the sandbox's init is written for x86_64 and aarch64"
#endif

/* The same on every architecture Linux numbers its system calls alike for since 5.x. */
enum {
	SYS_open_tree = 428, SYS_move_mount = 429, SYS_mount_setattr = 442,
	SYS_landlock_create_ruleset = 444, SYS_landlock_add_rule = 445, SYS_landlock_restrict_self = 446,
};

#define sys(n, a, b, c) sys6(n, (i64)(a), (i64)(b), (i64)(c), 0, 0, 0)

enum {
	ENOENT = 2, EPERM = 1, EACCES = 13, EEXIST = 17, EINTR = 4,
	AT_FDCWD = -100, AT_SYMLINK_NOFOLLOW = 0x100, AT_EMPTY_PATH = 0x1000, AT_RECURSIVE = 0x8000,
	O_WRONLY = 01, O_CREAT = 0100, O_EXCL = 0200, O_DIRECTORY = 0200000, O_CLOEXEC = 02000000,
	O_PATH = 010000000, AT_REMOVEDIR = 0x200, MNT_DETACH = 2,
	S_IFMT = 0170000, S_IFDIR = 0040000,
	CLONE_NEWNS = 0x20000, CLONE_NEWUSER = 0x10000000, CLONE_NEWPID = 0x20000000, CLONE_NEWNET = 0x40000000,
	SIGCHLD = 17, WALL = 0x40000000, SIG_BLOCK = 0, SIG_UNBLOCK = 1, SIG_SETMASK = 2, POLLERR = 8,
	PR_SET_DUMPABLE = 4,
	MS_RDONLY = 1, MS_NOSUID = 2, MS_NODEV = 4, MS_NOEXEC = 8, MS_BIND = 4096, MS_REC = 16384,
	MS_PRIVATE = 1 << 18,
	OPEN_TREE_CLONE = 1, OPEN_TREE_CLOEXEC = O_CLOEXEC, MOVE_MOUNT_F_EMPTY_PATH = 4,
	MOUNT_ATTR_RDONLY = 1,
	AF_INET = 2, SOCK_STREAM = 1, SOCK_DGRAM = 2, SOL_SOCKET = 1, SCM_RIGHTS = 1, MSG_NOSIGNAL = 0x4000,
	SIOCGIFFLAGS = 0x8913, SIOCSIFFLAGS = 0x8914, IFF_UP = 1,
	PR_SET_PDEATHSIG = 1, PR_CAPBSET_DROP = 24, PR_SET_NO_NEW_PRIVS = 38, PR_CAP_AMBIENT = 47,
	PR_CAP_AMBIENT_CLEAR_ALL = 4, SIGKILL = 9, STATX_TYPE = 1,
};

/* Landlock (<linux/landlock.h>): file rights with the ABI that brought them, as the rules grant
 * them (go-landlock's RODirs, RWDirs and RWFiles). */
enum {
	FS_EXECUTE = 1 << 0, FS_WRITE_FILE = 1 << 1, FS_READ_FILE = 1 << 2, FS_READ_DIR = 1 << 3,
	FS_REMOVE_DIR = 1 << 4, FS_REMOVE_FILE = 1 << 5, FS_MAKE_CHAR = 1 << 6, FS_MAKE_DIR = 1 << 7,
	FS_MAKE_REG = 1 << 8, FS_MAKE_SOCK = 1 << 9, FS_MAKE_FIFO = 1 << 10, FS_MAKE_BLOCK = 1 << 11,
	FS_MAKE_SYM = 1 << 12, FS_REFER = 1 << 13 /* ABI 2 */, FS_TRUNCATE = 1 << 14 /* ABI 3 */,
	NET_CONNECT_TCP = 1 << 1 /* ABI 4 */, SCOPE_ABSTRACT_UNIX_SOCKET = 1, SCOPE_SIGNAL = 2 /* ABI 6 */,
	FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR,
	FS_WRITE = FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG |
		   FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM | FS_TRUNCATE,
	FS_FILE = FS_EXECUTE | FS_WRITE_FILE | FS_TRUNCATE | FS_READ_FILE,
	RULE_PATH_BENEATH = 1, RULE_NET_PORT = 2, CREATE_RULESET_VERSION = 1,
};

struct ruleset_attr { u64 handled_fs, handled_net, scoped; };
struct path_beneath { u64 allowed; int parent_fd; } __attribute__((packed));
struct net_port { u64 allowed, port; };
struct mount_attr { u64 attr_set, attr_clr, propagation, userns_fd; };
struct cap_header { u32 version; int pid; };
struct cap_data { u32 effective, permitted, inheritable; };
/* Sockets (<linux/in.h>, <linux/socket.h>): the port and address in network byte order, bytes. */
struct sockaddr_in { u16 family; unsigned char port[2], addr[4], zero[8]; };
struct iovec { void *base; u64 len; };
struct msghdr { void *name; int namelen; struct iovec *iov; u64 iovlen; void *control; u64 controllen; int flags; };
/* A cmsghdr with one descriptor, padded to CMSG_SPACE(sizeof(int)). */
struct fd_cmsg { u64 len; int level, type, fd, pad; };

/* The compiler may emit calls to these for struct copies and initializers. */
void *memset(void *d, int c, unsigned long n)
{
	unsigned char *p = d;
	while (n--)
		*p++ = (unsigned char)c;
	return d;
}
void *memcpy(void *d, const void *s, unsigned long n)
{
	unsigned char *p = d;
	const unsigned char *q = s;
	while (n--)
		*p++ = *q++;
	return d;
}

static unsigned long len(const char *s)
{
	unsigned long n = 0;
	while (s[n])
		n++;
	return n;
}

static int eq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

/* Go's texts for the errors this program can meet (syscall.Errno.Error), so messages read alike. */
static const char *errtext(long e)
{
	switch (e) {
	case 1: return "operation not permitted";
	case 2: return "no such file or directory";
	case 7: return "argument list too long";
	case 8: return "exec format error";
	case 9: return "bad file descriptor";
	case 12: return "cannot allocate memory";
	case 13: return "permission denied";
	case 16: return "device or resource busy";
	case 17: return "file exists";
	case 20: return "not a directory";
	case 21: return "is a directory";
	case 22: return "invalid argument";
	case 24: return "too many open files";
	case 26: return "text file busy";
	case 28: return "no space left on device";
	case 30: return "read-only file system";
	case 32: return "broken pipe";
	case 36: return "file name too long";
	case 38: return "function not implemented";
	case 40: return "too many levels of symbolic links";
	case 95: return "operation not supported";
	case 98: return "address already in use";
	case 99: return "cannot assign requested address";
	}
	return 0;
}

/* text is a string being built, cut short at its capacity. */
struct text {
	char s[4096];
	unsigned long n;
};

static void put(struct text *t, const char *s)
{
	while (*s && t->n < sizeof t->s - 1)
		t->s[t->n++] = *s++;
	t->s[t->n] = 0;
}

static void putnum(struct text *t, unsigned long n)
{
	char b[24];
	int i = sizeof b;
	b[--i] = 0;
	do
		b[--i] = (char)('0' + n % 10);
	while (n /= 10);
	put(t, b + i);
}

static void __attribute__((noreturn)) quit(int code)
{
	for (;;)
		sys(SYS_exit_group, code, 0, 0);
}

/* die reports "factory sandbox: WHAT[ ARG][: errno text]" and exits with FAILED; err is a negative
 * errno from a system call, or 0. */
static void __attribute__((noreturn)) die(const char *what, const char *arg, long err)
{
	static struct text m;
	put(&m, "factory sandbox: ");
	put(&m, what);
	if (arg) {
		put(&m, " ");
		put(&m, arg);
	}
	if (err < 0) {
		const char *t = errtext(-err);
		put(&m, ": ");
		if (t)
			put(&m, t);
		else {
			put(&m, "errno ");
			putnum(&m, (unsigned long)-err);
		}
	}
	put(&m, "\n");
	sys(SYS_write, 2, m.s, m.n);
	quit(FAILED);
}

static long check(long r, const char *what, const char *arg)
{
	if (r < 0)
		die(what, arg, r);
	return r;
}

struct plan {
	int make_ns, made_ns, host_net, probe, abi;
	int gateway; /* -g, or 0 */
	u16 gateway_port;
	long parent;
	const char *host_tmp, *tmp, *make_home;
	/* Lists of any length: arrays as long as the command line, which start provides. */
	const char **writable, **read_only, **hide, **caches;
	int nwritable, nread_only, nhide, ncaches;
	u16 *ports;
	int nports;
	char **argv; /* the command's path, then its argv */
};

static int has(const char *s, char c)
{
	for (; *s; s++)
		if (*s == c)
			return 1;
	return 0;
}

static long number(const char *s, const char *opt)
{
	long n = 0;
	if (!*s)
		die("bad plan: no number for", opt, 0);
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || n > 1L << 40)
			die("bad plan: not a number for", opt, 0);
		n = n * 10 + (*s - '0');
	}
	return n;
}

static void add(const char **list, int *n, const char *path)
{
	if (path[0] != '/')
		die("bad plan: not an absolute path:", path, 0);
	list[(*n)++] = path;
}

static void parse(struct plan *pl, char **argv)
{
	for (argv++; *argv; argv++) {
		const char *o = *argv;
		if (eq(o, "--")) {
			pl->argv = argv + 1;
			if (!pl->argv[0] || !pl->argv[1])
				die("no command to run", 0, 0);
			return;
		}
		if (o[0] != '-' || !o[1] || o[2] || !has("nNHqcgpTtmwrxoau", o[1]))
			die("bad plan: unknown option", o, 0);
		switch (o[1]) {
		case 'n': pl->make_ns = 1; continue;
		case 'N': pl->made_ns = 1; continue;
		case 'H': pl->host_net = 1; continue;
		case 'q': pl->probe = 1; continue;
		}
		const char *v = argv[1];
		if (!v || !*v)
			die("bad plan: no value for", o, 0);
		argv++;
		switch (o[1]) {
		case 'c':
			if (number(v, o) > 65535)
				die("bad plan: bad port", v, 0);
			pl->ports[pl->nports++] = (u16)number(v, o);
			break;
		case 'g':
			/* Never one of the standard streams, which the command gets. */
			if (number(v, o) < 3 || number(v, o) > 1 << 20)
				die("bad plan: bad descriptor for -g:", v, 0);
			pl->gateway = (int)number(v, o);
			break;
		case 'p':
			if (number(v, o) < 1 || number(v, o) > 65535)
				die("bad plan: bad port", v, 0);
			pl->gateway_port = (u16)number(v, o);
			break;
		case 'T': pl->host_tmp = v; break;
		case 't': pl->tmp = v; break;
		case 'm': pl->make_home = v; break;
		case 'w': add(pl->writable, &pl->nwritable, v); break;
		case 'r': add(pl->read_only, &pl->nread_only, v); break;
		case 'x': add(pl->hide, &pl->nhide, v); break;
		case 'o': add(pl->caches, &pl->ncaches, v); break;
		case 'a': pl->abi = (int)number(v, o); break;
		case 'u': pl->parent = number(v, o); break;
		default: die("bad plan: unknown option", o, 0);
		}
	}
	die("bad plan: no --", 0, 0);
}

/* within reports whether path is dir or lies beneath it; both are clean absolute paths. */
static int within(const char *path, const char *dir)
{
	unsigned long n = len(dir);
	while (n > 0 && dir[n - 1] == '/')
		n--;
	for (unsigned long i = 0; i < n; i++)
		if (path[i] != dir[i])
			return 0;
	return path[n] == 0 || path[n] == '/';
}

static unsigned depth(const char *path)
{
	unsigned n = 0;
	for (; *path; path++)
		n += *path == '/';
	return n;
}

static char *join(char *buf, unsigned long size, const char *a, const char *b)
{
	unsigned long i = 0;
	for (; *a && i < size - 1; a++)
		buf[i++] = *a;
	if (i < size - 1)
		buf[i++] = '/';
	for (; *b && i < size - 1; b++)
		buf[i++] = *b;
	if (*a || *b)
		die("path too long:", buf, 0);
	buf[i] = 0;
	return buf;
}

static void write_file(const char *path, const char *data)
{
	int fd = (int)check(sys(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC), "cannot open", path);
	check(sys(SYS_write, fd, data, len(data)), "cannot write", path);
	sys(SYS_close, fd, 0, 0);
}

/* statx's mode of path (an fd's own with path "" and AT_EMPTY_PATH), or a negative errno. */
static long mode_of(int dirfd, const char *path, int flags)
{
	unsigned char stx[256];
	long r = sys6(SYS_statx, dirfd, (i64)path, flags, STATX_TYPE, (i64)stx, 0);
	if (r < 0)
		return r;
	return *(u16 *)(stx + 28);
}

/* id_map maps id to itself, for a uid_map or gid_map. */
static struct text id_map(long id)
{
	struct text t = {{0}, 0};
	putnum(&t, (unsigned long)id), put(&t, " "), putnum(&t, (unsigned long)id), put(&t, " 1");
	return t;
}

static int is_dir(const char *path)
{
	long mode = mode_of(AT_FDCWD, path, 0);
	return mode >= 0 && (mode & S_IFMT) == S_IFDIR;
}

/* make_namespaces makes this process's user, mount and (unless the host's is kept) network
 * namespaces, and a PID namespace for its children, with the user's ids mapped to themselves:
 * files the command creates are the user's, and tools see the user they expect. The process has
 * every capability inside. */
static void make_namespaces(const struct plan *pl)
{
	long uid = sys(SYS_getuid, 0, 0, 0), gid = sys(SYS_getgid, 0, 0, 0);
	long flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | (pl->host_net ? 0 : CLONE_NEWNET);
	check(sys(SYS_unshare, flags, 0, 0), "cannot make the namespaces: unshare", 0);
	write_file("/proc/self/uid_map", id_map(uid).s);
	write_file("/proc/self/setgroups", "deny");
	write_file("/proc/self/gid_map", id_map(gid).s);
}

/* A detached copy of the mounts at a path, taken before anything was mounted, to attach at target. */
struct op {
	const char *target;
	int fd;
};

/* clone_tree takes a copy of the mounts at source, read-only or writable; fd -ENOENT if missing. */
static struct op clone_tree(const char *source, const char *target, int writable)
{
	struct op op = {target, -1};
	long fd = sys(SYS_open_tree, AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (fd == -ENOENT) {
		op.fd = -ENOENT;
		return op;
	}
	check(fd, "cannot bind", source);
	struct mount_attr attr = {0};
	if (writable)
		attr.attr_clr = MOUNT_ATTR_RDONLY;
	else
		attr.attr_set = MOUNT_ATTR_RDONLY;
	check(sys6(SYS_mount_setattr, fd, (i64) "", AT_EMPTY_PATH | AT_RECURSIVE, (i64)&attr, sizeof attr, 0),
	      "cannot set the access of the bind of", source);
	op.fd = (int)fd;
	return op;
}

static void attach(struct op op)
{
	check(sys6(SYS_move_mount, op.fd, (i64) "", AT_FDCWD, (i64)op.target, MOVE_MOUNT_F_EMPTY_PATH, 0),
	      "cannot bind", op.target);
	sys(SYS_close, op.fd, 0, 0);
}

/* mkdirs creates path and its missing parents, mode 0700. */
static void mkdirs(const char *path)
{
	char buf[4096];
	unsigned long n = len(path);
	if (n >= sizeof buf)
		die("path too long:", path, 0);
	memcpy(buf, path, n + 1);
	for (unsigned long i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != 0)
			continue;
		char c = buf[i];
		buf[i] = 0;
		long r = sys(SYS_mkdirat, AT_FDCWD, buf, 0700);
		if (r < 0 && r != -EEXIST)
			die("cannot create", buf, r);
		buf[i] = c;
	}
}

static char empty_name[4096];

/* fresh_tmp mounts a tmpfs at the host's /tmp, private to this mount namespace, with HOME in it and,
 * when files are to be hidden, the empty file bound over them. */
static struct op fresh_tmp(const struct plan *pl)
{
	check(sys6(SYS_mount, (i64) "tmpfs", (i64)pl->host_tmp, (i64) "tmpfs", MS_NOSUID | MS_NODEV, (i64) "mode=700", 0),
	      "cannot mount a private /tmp", 0);
	if (pl->make_home) {
		if (!within(pl->make_home, pl->host_tmp) || eq(pl->make_home, pl->host_tmp))
			die("HOME is not inside the private /tmp:", pl->make_home, 0);
		mkdirs(pl->make_home);
	}
	struct op empty = {0, -1};
	if (pl->nhide == 0)
		return empty;
	join(empty_name, sizeof empty_name, pl->host_tmp, ".factory-empty");
	long fd = check(sys(SYS_openat, AT_FDCWD, empty_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC),
			"cannot create the file that hides files", 0);
	sys(SYS_close, fd, 0, 0);
	return clone_tree(empty_name, empty_name, 0);
}

/* skeleton creates, in the private /tmp, the mount points of the ops whose targets lie under it, and
 * makes the directories it creates there read-only, so that nothing but the targets can be
 * written. */
static void skeleton(const char *tmp, const struct op *ops, int n)
{
	/* The first directories below tmp on the way to the targets, as prefixes of the targets. */
	const char *tops[n + 1];
	unsigned long toplen[n + 1];
	int ntops = 0;
	char buf[4096];
	for (int i = 0; i < n; i++) {
		const char *t = ops[i].target;
		if (!within(t, tmp) || eq(t, tmp))
			continue;
		unsigned long tl = len(t);
		if (tl >= sizeof buf)
			die("path too long:", t, 0);
		memcpy(buf, t, tl + 1);
		unsigned long slash = tl;
		while (buf[slash] != '/')
			slash--;
		buf[slash] = 0;
		mkdirs(buf);
		long mode = check(mode_of(ops[i].fd, "", AT_EMPTY_PATH), "cannot inspect", t);
		long r;
		if ((mode & S_IFMT) == S_IFDIR)
			r = sys(SYS_mkdirat, AT_FDCWD, t, 0700);
		else {
			r = sys(SYS_openat, AT_FDCWD, t, O_WRONLY | O_CREAT | O_CLOEXEC);
			if (r >= 0)
				sys(SYS_close, r, 0, 0);
		}
		if (r < 0 && r != -EEXIST)
			die("cannot create the mount point of", t, r);
		/* The first component below tmp. */
		unsigned long end = len(tmp);
		while (end > 0 && tmp[end - 1] == '/')
			end--;
		end++;
		while (t[end] && t[end] != '/')
			end++;
		int seen = 0;
		for (int j = 0; j < ntops; j++) {
			unsigned long k = 0;
			while (k < end && tops[j][k] == t[k])
				k++;
			seen |= k == end && toplen[j] == end;
		}
		if (!seen) {
			tops[ntops] = t;
			toplen[ntops++] = end;
		}
	}
	for (int j = 0; j < ntops; j++) {
		memcpy(buf, tops[j], toplen[j]);
		buf[toplen[j]] = 0;
		struct op op = clone_tree(buf, buf, 0);
		check(op.fd, "cannot bind", buf);
		attach(op);
	}
}

/* hide covers path, if it is visible, with an empty read-only directory or an unreadable empty
 * file. */
static void hide(const char *path, struct op empty)
{
	long mode = mode_of(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW);
	if (mode == -ENOENT)
		return;
	check(mode, "cannot hide", path);
	if ((mode & S_IFMT) == S_IFDIR) {
		check(sys6(SYS_mount, (i64) "tmpfs", (i64)path, (i64) "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			   (i64) "mode=000,size=4k", 0),
		      "cannot hide", path);
		return;
	}
	struct text src = {{0}, 0};
	put(&src, "/proc/self/fd/"), putnum(&src, (unsigned long)empty.fd);
	check(sys6(SYS_mount, (i64)src.s, (i64)path, 0, MS_BIND, 0, 0), "cannot hide", path);
}

/* overlay_caches mounts an overlay of each cache whose directory lower holds (-1: missing, skipped
 * and dropped from pl), with its upper and work directories on a tmpfs of their own, and adds a
 * detached copy of it to ops, to be attached at the cache's own path. The tmpfs is then detached
 * from every path: the command reaches it only through the overlays, and it goes with them. The
 * layers are named through /proc/self/fd, so that no path needs escaping in the options. Returns
 * the new number of ops. */
static int overlay_caches(struct plan *pl, const int *lower, struct op *ops, int n)
{
	int any = 0;
	for (int i = 0; i < pl->ncaches; i++)
		any |= lower[i] >= 0;
	if (!any) {
		pl->ncaches = 0;
		return n;
	}
	static char layers[4096];
	join(layers, sizeof layers, pl->host_tmp, ".factory-cache-layers");
	check(sys(SYS_mkdirat, AT_FDCWD, layers, 0700), "cannot create", layers);
	check(sys6(SYS_mount, (i64) "tmpfs", (i64)layers, (i64) "tmpfs", MS_NOSUID | MS_NODEV, (i64) "mode=700", 0),
	      "cannot mount the tmpfs of the caches' writes", 0);
	int root = (int)check(sys(SYS_openat, AT_FDCWD, layers, O_PATH | O_DIRECTORY | O_CLOEXEC), "cannot open", layers);
	for (int i = 0; i < pl->ncaches; i++) {
		if (lower[i] < 0) {
			pl->caches[i] = 0;
			continue;
		}
		struct text dir = {{0}, 0}, opts = {{0}, 0}, at = {{0}, 0};
		putnum(&dir, (unsigned long)i);
		check(sys(SYS_mkdirat, root, dir.s, 0700), "cannot create the layers of", pl->caches[i]);
		for (const char *sub = "uwm"; *sub; sub++) {
			struct text d = dir;
			char name[3] = {'/', *sub, 0};
			put(&d, name);
			check(sys(SYS_mkdirat, root, d.s, 0700), "cannot create the layers of", pl->caches[i]);
		}
		put(&opts, "lowerdir=/proc/self/fd/"), putnum(&opts, (unsigned long)lower[i]);
		put(&opts, ",upperdir=/proc/self/fd/"), putnum(&opts, (unsigned long)root), put(&opts, "/"), put(&opts, dir.s);
		put(&opts, "/u,workdir=/proc/self/fd/"), putnum(&opts, (unsigned long)root), put(&opts, "/"), put(&opts, dir.s);
		/* userxattr: the overlay's own attributes (whiteouts, opaque directories) in user.*, the
		 * only ones an unprivileged user namespace may set. */
		put(&opts, "/w,userxattr");
		/* The view's root has the upper directory's mode: the cache's own. */
		struct text upper = dir;
		put(&upper, "/u");
		long mode = check(mode_of(lower[i], "", AT_EMPTY_PATH), "cannot inspect", pl->caches[i]);
		check(sys(SYS_fchmodat, root, upper.s, mode & 07777), "cannot create the layers of", pl->caches[i]);
		put(&at, layers), put(&at, "/"), put(&at, dir.s), put(&at, "/m");
		check(sys6(SYS_mount, (i64) "overlay", (i64)at.s, (i64) "overlay", MS_NOSUID | MS_NODEV, (i64)opts.s, 0),
		      "cannot mount the copy-on-write view of", pl->caches[i]);
		struct op op = clone_tree(at.s, pl->caches[i], 1);
		check(op.fd, "cannot bind the copy-on-write view of", pl->caches[i]);
		ops[n++] = op;
		sys(SYS_close, lower[i], 0, 0);
	}
	sys(SYS_close, root, 0, 0);
	check(sys(SYS_umount2, layers, MNT_DETACH, 0), "cannot detach the tmpfs of the caches' writes", 0);
	check(sys(SYS_unlinkat, AT_FDCWD, layers, AT_REMOVEDIR), "cannot remove", layers);
	return n;
}

/* build_view makes the file system read-only but for the writable paths, with a private /tmp, the
 * read-only paths bound read-only, the caches copy-on-write and the hidden paths covered. */
static void build_view(struct plan *pl)
{
	/* Our mounts must not propagate to the host. */
	check(sys6(SYS_mount, (i64) "", (i64) "/", 0, MS_REC | MS_PRIVATE, 0, 0), "cannot make the mounts private", 0);
	/* Copies of the sources come first: the private /tmp will cover those under /tmp. */
	struct op ops[pl->nwritable + pl->nread_only + pl->ncaches + 1];
	int n = 0;
	for (int i = 0; i < pl->nwritable + pl->nread_only; i++) {
		int writable = i < pl->nwritable;
		const char *path = writable ? pl->writable[i] : pl->read_only[i - pl->nwritable];
		struct op op = clone_tree(path, path, writable);
		if (op.fd != -ENOENT)
			ops[n++] = op;
	}
	/* And the caches' directories, the lower layers of their views. */
	int lower[pl->ncaches + 1];
	for (int i = 0; i < pl->ncaches; i++) {
		lower[i] = (int)sys(SYS_openat, AT_FDCWD, pl->caches[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (lower[i] < 0 && lower[i] != -ENOENT)
			die("cannot open the cache", pl->caches[i], lower[i]);
	}
	struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
	check(sys6(SYS_mount_setattr, AT_FDCWD, (i64) "/", AT_RECURSIVE, (i64)&ro, sizeof ro, 0),
	      "cannot make the file system read-only", 0);
	struct op empty = fresh_tmp(pl);
	n = overlay_caches(pl, lower, ops, n);
	/* The more specific path wins: .git is read-only inside the writable work tree, a cache's view
	 * inside the work tree is copy-on-write. A stable insertion sort by depth. */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && depth(ops[j - 1].target) > depth(ops[j].target); j--) {
			struct op t = ops[j];
			ops[j] = ops[j - 1];
			ops[j - 1] = t;
		}
	skeleton(pl->host_tmp, ops, n);
	for (int i = 0; i < n; i++)
		attach(ops[i]);
	for (int i = 0; i < pl->nhide; i++)
		hide(pl->hide[i], empty);
	/* The name goes once the hidden paths are covered: a bind from a copy of an unlinked file
	 * fails. */
	if (pl->nhide)
		sys(SYS_unlinkat, AT_FDCWD, empty_name, 0);
	/* A private /dev/shm, where Python's multiprocessing keeps its semaphores. */
	if (is_dir("/dev/shm"))
		check(sys6(SYS_mount, (i64) "tmpfs", (i64) "/dev/shm", (i64) "tmpfs", MS_NOSUID | MS_NODEV, (i64) "mode=1777", 0),
		      "cannot mount a private /dev/shm", 0);
}

/* loopback_up brings up lo in the new network namespace, the only interface there. */
static void loopback_up(void)
{
	long fd = check(sys(SYS_socket, AF_INET, SOCK_DGRAM | O_CLOEXEC, 0), "cannot bring up loopback", 0);
	struct {
		char name[16];
		short flags;
		char pad[22];
	} ifr = {"lo", 0, {0}};
	check(sys(SYS_ioctl, fd, SIOCGIFFLAGS, &ifr), "cannot bring up loopback: SIOCGIFFLAGS", 0);
	ifr.flags |= IFF_UP;
	check(sys(SYS_ioctl, fd, SIOCSIFFLAGS, &ifr), "cannot bring up loopback: SIOCSIFFLAGS", 0);
	sys(SYS_close, fd, 0, 0);
}

/* hand_over_gateway listens on 127.0.0.1 at the gateway port in the new network namespace and sends
 * the listening socket to factory over the -g socket, with one byte of data. The socket stays in this
 * namespace, where the command dials it, while factory accepts its connections outside. Neither
 * descriptor is left to the command. */
static void hand_over_gateway(const struct plan *pl)
{
	struct text port = {{0}, 0};
	putnum(&port, pl->gateway_port);
	long fd = check(sys(SYS_socket, AF_INET, SOCK_STREAM | O_CLOEXEC, 0), "cannot make the gateway port", port.s);
	struct sockaddr_in addr = {AF_INET, {(unsigned char)(pl->gateway_port >> 8), (unsigned char)pl->gateway_port},
				   {127, 0, 0, 1}, {0}};
	check(sys(SYS_bind, fd, &addr, sizeof addr), "cannot bind the gateway port", port.s);
	check(sys(SYS_listen, fd, 128, 0), "cannot listen on the gateway port", port.s);
	char byte = 0;
	struct iovec iov = {&byte, 1};
	struct fd_cmsg cmsg = {16 + sizeof(int), SOL_SOCKET, SCM_RIGHTS, (int)fd, 0}; /* CMSG_LEN(sizeof(int)) */
	struct msghdr msg = {0, 0, &iov, 1, &cmsg, sizeof cmsg, 0};
	/* MSG_NOSIGNAL: factory gone or the port closed is an error to report, not a SIGPIPE. */
	check(sys(SYS_sendmsg, pl->gateway, &msg, MSG_NOSIGNAL), "cannot hand the gateway port over to factory: sendmsg", 0);
	sys(SYS_close, fd, 0, 0);
	sys(SYS_close, pl->gateway, 0, 0);
}

/* allow adds a rule granting access (as far as handled) beneath path; a missing path is an error
 * unless ignore_missing. */
static void allow(int ruleset, u64 handled, u64 access, int ignore_missing, const char *path)
{
	long fd = sys(SYS_openat, AT_FDCWD, path, O_PATH | O_CLOEXEC);
	if (fd == -ENOENT && ignore_missing)
		return;
	check(fd, "cannot apply the Landlock ruleset: open", path);
	struct path_beneath rule = {access & handled, (int)fd};
	check(sys6(SYS_landlock_add_rule, ruleset, RULE_PATH_BENEATH, (i64)&rule, 0, 0, 0),
	      "cannot apply the Landlock ruleset: landlock_add_rule", path);
	sys(SYS_close, fd, 0, 0);
}

/* restrict_landlock adds the second layer: read and execute everywhere, write only to the writable
 * paths. Inside namespaces the network is already cut; alone, Landlock denies TCP connections (ABI
 * 4 and later). Signals and abstract unix sockets stay inside the sandbox (ABI 6 and later). On ABI
 * 1, which cannot grant the right to link or rename files between directories (refer), it does not
 * restrict, as go-landlock's best effort did. */
static void restrict_landlock(const struct plan *pl, int ns)
{
	static const char *devices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};
	if (pl->abi < 2)
		return;
	struct ruleset_attr attr = {0};
	attr.handled_fs = pl->abi >= 5 ? (1 << 16) - 1 : pl->abi >= 3 ? (1 << 15) - 1 : (1 << 14) - 1;
	if ((!ns || pl->host_net) && pl->abi >= 4)
		/* Binding stays allowed (tests listen on 127.0.0.1); connecting is what reaches out, and
		 * with the host's network only to the ports given. */
		attr.handled_net = NET_CONNECT_TCP;
	if (pl->abi >= 6)
		attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
	int rs = (int)check(sys(SYS_landlock_create_ruleset, &attr, sizeof attr, 0),
			    "cannot apply the Landlock ruleset: landlock_create_ruleset", 0);
	allow(rs, attr.handled_fs, FS_READ, 0, "/");
	u64 rw = FS_READ | FS_WRITE | FS_REFER;
	if (ns) {
		allow(rs, attr.handled_fs, rw, 0, pl->host_tmp);
	} else if (pl->tmp) {
		allow(rs, attr.handled_fs, rw, 0, pl->tmp);
	}
	for (int i = 0; i < pl->nwritable; i++)
		allow(rs, attr.handled_fs, rw, 0, pl->writable[i]);
	/* The caches' views, those shown: writes there go to the command's own layer. */
	for (int i = 0; i < pl->ncaches; i++)
		if (pl->caches[i])
			allow(rs, attr.handled_fs, rw, 0, pl->caches[i]);
	if (ns && is_dir("/dev/shm"))
		allow(rs, attr.handled_fs, rw, 0, "/dev/shm");
	for (unsigned i = 0; i < sizeof devices / sizeof *devices; i++)
		allow(rs, attr.handled_fs, FS_FILE, 1, devices[i]);
	if (pl->host_net && attr.handled_net)
		for (int i = 0; i < pl->nports; i++) {
			struct net_port rule = {NET_CONNECT_TCP, pl->ports[i]};
			check(sys6(SYS_landlock_add_rule, rs, RULE_NET_PORT, (i64)&rule, 0, 0, 0),
			      "cannot apply the Landlock ruleset: allow TCP connect to a port", 0);
		}
	check(sys6(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0), "cannot apply the Landlock ruleset: prctl(PR_SET_NO_NEW_PRIVS)", 0);
	check(sys(SYS_landlock_restrict_self, rs, 0, 0), "cannot apply the Landlock ruleset: landlock_restrict_self", 0);
	sys(SYS_close, rs, 0, 0);
}

/* drop_capabilities leaves the command none of the capabilities the init used, whatever its uid,
 * also across the execve: the ambient and inheritable sets are cleared and the bounding set
 * emptied. */
static void drop_capabilities(void)
{
	check(sys6(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0), "cannot clear ambient capabilities", 0);
	/* Up to the first capability the kernel does not know (EINVAL): no need to read
	 * /proc/sys/kernel/cap_last_cap. */
	for (long c = 0;; c++) {
		long r = sys6(SYS_prctl, PR_CAPBSET_DROP, c, 0, 0, 0, 0);
		if (r == -22 && c > 0)
			break;
		check(r, "cannot drop a capability from the bounding set", 0);
	}
	struct cap_header hdr = {0x20080522, 0}; /* _LINUX_CAPABILITY_VERSION_3 */
	struct cap_data data[2] = {{0}};
	check(sys(SYS_capset, &hdr, data, 0), "cannot clear capabilities", 0);
}

/* tie_to_factory makes this process die with factory. proc arms this signal at the fork, but an
 * exec may clear it; armed again here, it survives the command's exec. If factory died before, the
 * parent is another (in a PID namespace made at the fork the parent is outside it and reads as 0:
 * the signal alone covers it). */
static void tie_to_factory(const struct plan *pl)
{
	check(sys6(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0, 0), "cannot set the parent-death signal", 0);
	if (pl->parent && !pl->made_ns && sys(SYS_getppid, 0, 0, 0) != pl->parent)
		die("factory exited before the command started", 0, 0);
}

static long fork_process(void)
{
	return sys6(SYS_clone, SIGCHLD, 0, 0, 0, 0, 0);
}

/* pass_on ends this process the way a wait status says the command ended: with its exit code, or
 * killed by its signal (without a core dump of its own: the command dumped its core, if any). */
static void __attribute__((noreturn)) pass_on(int status)
{
	int sig = status & 0x7f;
	if (sig == 0)
		quit((status >> 8) & 0xff);
	sys6(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0, 0);
	u64 dfl[4] = {0, 0, 0, 0}; /* struct sigaction: SIG_DFL, no flags, no restorer, empty mask */
	sys6(SYS_rt_sigaction, sig, (i64)dfl, 0, 8, 0, 0);
	sys(SYS_kill, sys(SYS_getpid, 0, 0, 0), sig, 0);
	u64 set = 1UL << (sig - 1);
	sys6(SYS_rt_sigprocmask, SIG_UNBLOCK, (i64)&set, 0, 8, 0, 0);
	quit(128 + sig);
}

/* The write end of the pipe on which PID 1 reports the command's wait status (in .bss, as all of
 * this program's data: an initialized .data would add a segment of its own). */
static int status_fd;

/* run_in_pid_namespace forks this process, whose namespaces make_namespaces made, into PID 1 of the
 * new PID namespace, and returns in PID 1 only. This process stays factory's child, in the process
 * group factory kills, with every signal blocked (so that the group's SIGTERM reaches the command
 * but not its stand-ins), until PID 1 reports the command's end; then it ends the same way.
 *
 * PID 1 dies with this process (its parent-death signal), and the kernel kills every process of a
 * PID namespace whose first process dies: when factory dies for any reason, this process is killed
 * (its own parent-death signal), then PID 1, then everything the command started, daemons that
 * left the process group included. mask receives the signal mask to give back to the command. */
static void run_in_pid_namespace(u64 *mask)
{
	u64 all = ~0UL;
	check(sys6(SYS_rt_sigprocmask, SIG_BLOCK, (i64)&all, (i64)mask, 8, 0, 0), "cannot block signals", 0);
	int p[2];
	check(sys(SYS_pipe2, p, O_CLOEXEC, 0), "cannot make a pipe", 0);
	long pid = check(fork_process(), "cannot start the PID namespace's init: clone", 0);
	if (pid > 0) {
		sys(SYS_close, p[1], 0, 0);
		/* A status once the command ended; nothing when PID 1 failed to set up (125) or probed
		 * (0), and then its own status is the one to pass on. PID 1's end is reaped only once
		 * the kernel has killed the rest of its namespace. */
		int status = 0, own = 0;
		long n;
		while ((n = sys(SYS_read, p[0], &status, sizeof status)) == -EINTR)
			;
		while (sys6(SYS_wait4, pid, (i64)&own, WALL, 0, 0, 0) == -EINTR)
			;
		pass_on(n == sizeof status ? status : own);
	}
	sys(SYS_close, p[0], 0, 0);
	status_fd = p[1];
	check(sys6(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0, 0), "cannot set the parent-death signal", 0);
	/* The parent may have died before the signal was armed: then the pipe has no reader left. */
	struct {
		int fd;
		short events, revents;
	} pf = {p[1], 0, 0};
	struct {
		long s, ns;
	} now = {0, 0};
	if (sys6(SYS_ppoll, (i64)&pf, 1, (i64)&now, 0, 0, 0) > 0 && (pf.revents & POLLERR))
		quit(FAILED);
}

/* supervise forks the command, as PID 2, and reaps every process of the namespace left to PID 1
 * until the command ends; it reports the command's wait status and exits, and the kernel kills
 * whatever the command left behind, as proc kills a command's process group once it has ended. */
static void __attribute__((noreturn)) supervise(const struct plan *pl, char **envp, u64 mask)
{
	long cmd = check(fork_process(), "cannot start the command: clone", 0);
	if (cmd == 0) {
		sys6(SYS_rt_sigprocmask, SIG_SETMASK, (i64)&mask, 0, 8, 0, 0);
		long err = sys(SYS_execve, pl->argv[0], pl->argv + 1, envp);
		die("cannot execute", pl->argv[0], err);
	}
	for (;;) {
		int status = 0;
		long r = sys6(SYS_wait4, -1, (i64)&status, WALL, 0, 0, 0);
		if (r == cmd) {
			sys(SYS_write, status_fd, &status, sizeof status);
			quit(0);
		}
		if (r < 0 && r != -EINTR)
			die("cannot wait for the command", 0, r);
	}
}

static void mount_proc(void)
{
	check(sys6(SYS_mount, (i64) "proc", (i64) "/proc", (i64) "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0, 0),
	      "cannot mount a private /proc", 0);
}

void __attribute__((noreturn, used)) start(long *sp)
{
	int argc = (int)sp[0];
	char **argv = (char **)(sp + 1), **envp = argv + argc + 1;
	static struct plan pl;
	/* No list can hold more values than the command line has arguments. */
	const char *writable[argc], *read_only[argc], *hidden[argc], *caches[argc];
	u16 ports[argc];
	pl.writable = writable, pl.read_only = read_only, pl.hide = hidden, pl.caches = caches, pl.ports = ports;
	parse(&pl, argv);
	int ns = pl.make_ns || pl.made_ns;
	if (ns && !pl.host_tmp)
		die("bad plan: no -T", 0, 0);
	if (!ns && pl.ncaches)
		die("bad plan: -o needs namespaces", 0, 0);
	if (pl.gateway && (!ns || pl.host_net))
		die("bad plan: -g needs a network namespace of the init's", 0, 0);
	if (!pl.gateway != !pl.gateway_port)
		die("bad plan: -g and -p go together", 0, 0);
	if (pl.make_ns)
		make_namespaces(&pl);
	if (ns) {
		build_view(&pl);
		if (!pl.host_net) {
			loopback_up();
			if (pl.gateway)
				hand_over_gateway(&pl);
		}
		if (pl.made_ns)
			/* Our own /proc: the new PID namespace's processes only. */
			mount_proc();
		/* The mounts moved the directory we stand in. */
		static char wd[4096];
		if (sys(SYS_getcwd, wd, sizeof wd, 0) > 0)
			check(sys(SYS_chdir, wd, 0, 0), "cannot enter", wd);
	}
	u64 mask = 0;
	if (pl.make_ns) {
		tie_to_factory(&pl);
		run_in_pid_namespace(&mask);
		/* PID 1 from here on. Where the host's /proc is partly covered (a container's masked
		 * paths) the kernel refuses a new one to an unprivileged user namespace: the command
		 * then sees the host's, and the PID namespace still holds everything it starts. */
		long r = sys6(SYS_mount, (i64) "proc", (i64) "/proc", (i64) "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, 0, 0);
		if (r < 0 && r != -EPERM && r != -EACCES)
			die("cannot mount a private /proc", 0, r);
	}
	restrict_landlock(&pl, ns);
	if (ns)
		drop_capabilities();
	if (pl.probe)
		quit(0);
	if (pl.make_ns)
		supervise(&pl, envp, mask);
	tie_to_factory(&pl);
	long err = sys(SYS_execve, pl.argv[0], pl.argv + 1, envp);
	die("cannot execute", pl.argv[0], err);
}
