//! `protocol!`: a protocol declared once. From one declaration per request — its label
//! (name, number, doc), the words and string it carries, and the `Request` variant it
//! decodes to — the macro generates:
//!
//! - the label consts, with their docs;
//! - the compile-time checks that every label lies in the protocol's range of
//!   [`crate::labels`] (the range is named once, in the declaration) and that no two
//!   requests share one: a label outside the range, or taken twice, breaks the build;
//! - the `Request` enum, exactly as declared (variant names, fields, attributes);
//! - its [`Decode`](crate::server::Decode) impl: one `match` on the label, as lean as a
//!   hand-written one. A message with fewer words than the request names is `Malformed`,
//!   a `text` string missing or not UTF-8 is `Malformed`, an unknown label `Unsupported`;
//!   a request's own checks go in its build expression (`= expr`, which may use `?`);
//! - client stubs, in a module of the name given: one function per request that builds
//!   the message (words, and the string if any), calls the server (through
//!   [`crate::server::request`], or the function named after `via`) and returns the reply
//!   `Msg`, or its words after MR1 when the request names them (`-> [a, b]`: `[u64; 2]`
//!   of MR2 and MR3; `-> []`: nothing but whether it succeeded). Receive windows and
//!   receive buffers for what a reply maps or carries are the caller's to open around
//!   the stub. The stubs' error is `abi::Error`, or the type after `, error` (one
//!   `From<abi::Error>`, as the `via` function's). Helpers written by hand over the
//!   stubs (a typed answer, a request in pieces, windows opened for a mapping) go in
//!   braces after the module's name (`client client { ... };`) and land in the same
//!   module.
//!
//! ```ignore
//! rt::protocol! {
//!     #[derive(Debug, Clone, Copy, PartialEq, Eq)]
//!     pub enum Request<'a> in rt::labels::ECHO;
//!     client client;
//!     requests {
//!         /// Reply with the same words followed by the badge the server saw.
//!         ECHO = 0x21, fn echo(; rest words) => Echo(&'a [u64]);
//!         /// Call the thread in slot MR1 with ECHO(MR2 + 1); reply with its first word + 1.
//!         FORWARD = 0x23, fn forward(slot, word) -> [answer] => Forward { slot: u64, word: u64 };
//!         /// MR1 = most bytes wanted (at least 1).
//!         READ = 0x71, fn read(max) => Read { max: u64 } = Request::Read { max: max.max(1) };
//!         /// Reply, then stop serving.
//!         QUIT = 0x25, fn quit() => Quit;
//!     }
//!     nested {
//!         /// The graft protocol.
//!         Graft(graft_api::Request<'a>) if graft_api::is_graft_label,
//!     }
//! }
//! ```
//!
//! A request is `LABEL = number, fn stub(words; kind name) [-> [reply words]] [via path]
//! => Variant [fields] [= build];`:
//! - `words` name MR1, MR2, ... in order; each is bound (a `u64`) for the build expression
//!   and is a `u64` argument of the stub;
//! - `; text name` binds the string as `&str` (`Malformed` if missing or not UTF-8),
//!   `; bytes name` as `&[u8]` (empty if none came), `; string name` as `Option<&[u8]>`
//!   (None if the message carried no string), `; rest name` the words after the named
//!   ones as `&[u64]`, `; items name` the number of typed items it carried (a
//!   `usize`); the stub takes a `&str`, `&[u8]`, `&[u8]`, `&[u64]` or the items to send,
//!   `&[(Fpage, control)]`, for it;
//! - `via path`: this request's stub calls through that function instead of the
//!   module's (a request through another capability than the server's own);
//! - the variant is declared as in an enum (unit, `(T)` or `{ field: T, ... }`); without
//!   `= build`, a struct variant's fields are taken from the bindings of the same names,
//!   a tuple variant's from all the bindings in order;
//! - `nested` variants carry another protocol's request (grafts, reconfiguration, live
//!   update) decoded by its own `Decode` when the predicate says the label is its.
//!
//! The stubs are for well-formed requests; tests that send malformed ones on purpose
//! build their messages by hand (`Msg::new(label, ..)`).

/// Declare a protocol once (see the module's documentation).
#[macro_export]
macro_rules! protocol {
    (
        $(#[$eattr:meta])*
        $vis:vis enum $name:ident $(<$lt:lifetime>)? in $range:expr;
        client $cmod:ident $(via $call:path)? $(, error $err:ty)? $({ $($extra:item)* })?;
        requests {
            $(
                $(#[$doc:meta])*
                $label:ident = $num:expr, fn $stub:ident ( $($w:ident),* $(; $sk:ident $s:ident)? )
                    $(-> [$($r:ident),* $(,)?])? $(via $rcall:path)?
                    => $(#[$vattr:meta])* $variant:ident
                    $({ $($f:ident : $ft:ty),* $(,)? })? $(( $($tt:ty),* $(,)? ))?
                    $(= $build:expr)? ;
            )*
        }
        $(nested {
            $( $(#[$nattr:meta])* $nvariant:ident ( $nty:ty ) if $npred:path ),* $(,)?
        })?
    ) => {
        $(
            $(#[$doc])*
            pub const $label: u64 = $num;
        )*

        // Its labels lie in its range of the registry (`rt::labels`) and are distinct,
        // checked when it builds.
        $(
            const _: () = assert!(
                $crate::labels::all_in($range, &[$label]),
                concat!(stringify!($label), " of ", module_path!(), " lies outside its protocol's range of rt::labels"),
            );
        )*
        const _: () = assert!(
            $crate::labels::distinct(&[$($label),*]),
            concat!("two requests of ", module_path!(), "::", stringify!($name), " share a label"),
        );

        $(#[$eattr])*
        $vis enum $name $(<$lt>)? {
            $(
                $(#[$vattr])*
                $variant $({ $($f : $ft),* })? $(( $($tt),* ))?,
            )*
            $($(
                $(#[$nattr])*
                $nvariant($nty),
            )*)?
        }

        $crate::protocol!(@decode $name [$($lt)?] args {
            Ok(match args.msg.label() {
                $(
                    $label => {
                        $crate::protocol!(@bind args [$($w),*] $($sk $s)?);
                        $crate::protocol!(@build $name $variant [$({$($f),*})?] [$(($($tt),*))?] [$($w,)* $($s)?] [$($build)?])
                    }
                )*
                $($(
                    l if $npred(l) => $name::$nvariant($crate::server::Decode::decode(args)?),
                )*)?
                _ => return Err($crate::abi::Error::Unsupported),
            })
        });

        /// Client stubs: `srv` is the slot of a capability to the server; each builds the
        /// request's message, calls (`rt::server::request`, which turns MR1 into the
        /// result, unless the declaration names another call) and answers the reply.
        $vis mod $cmod {
            $crate::protocol!(@call $($call)?);
            $crate::protocol!(@error $($err)?);
            $(
                $(#[$doc])*
                // As many arguments as the request has words.
                #[allow(clippy::too_many_arguments)]
                pub fn $stub(srv: u64 $(, $w: u64)* $(, $s: $crate::protocol!(@arg $sk))?)
                    -> $crate::protocol!(@ret $([$($r)*])?)
                {
                    #[allow(unused_mut)]
                    let mut m = $crate::protocol!(@msg super::$label, [$($w),*] $($sk $s)?);
                    $crate::protocol!(@call_here $($rcall)?);
                    __call_here(srv, &mut m)?;
                    $crate::protocol!(@reply m $([$($r)*])?)
                }
            )*
            $($($extra)*)?
        }
    };

    (@decode $name:ident [] $a:ident $body:block) => {
        impl $crate::server::Decode<'_> for $name {
            fn decode($a: &$crate::server::Args<'_>) -> Result<Self, $crate::abi::Error> $body
        }
    };
    (@decode $name:ident [$lt:lifetime] $a:ident $body:block) => {
        impl<$lt> $crate::server::Decode<$lt> for $name<$lt> {
            fn decode($a: &$crate::server::Args<$lt>) -> Result<Self, $crate::abi::Error> $body
        }
    };

    (@bind $a:ident [$($w:ident),*]) => {
        #[allow(unused_variables)]
        let [$($w),*] = $a.words()?;
    };
    (@bind $a:ident [$($w:ident),*] text $s:ident) => {
        #[allow(unused_variables)]
        let [$($w),*] = $a.words()?;
        #[allow(unused_variables)]
        let $s = $a.text()?;
    };
    (@bind $a:ident [$($w:ident),*] bytes $s:ident) => {
        #[allow(unused_variables)]
        let [$($w),*] = $a.words()?;
        #[allow(unused_variables)]
        let $s = $a.bytes();
    };
    (@bind $a:ident [$($w:ident),*] string $s:ident) => {
        #[allow(unused_variables)]
        let [$($w),*] = $a.words()?;
        #[allow(unused_variables)]
        let $s = $a.msg.tag().has_string().then_some($a.bytes());
    };
    (@bind $a:ident [$($w:ident),*] items $s:ident) => {
        #[allow(unused_variables)]
        let [$($w),*] = $a.words()?;
        #[allow(unused_variables)]
        let $s = $a.msg.items();
    };
    (@bind $a:ident [] rest $s:ident) => {
        let $s = $a.all();
    };
    (@bind $a:ident [$($w:ident),*] rest $s:ident) => {
        #[allow(unused_variables)]
        let [$($w),*] = $a.words()?;
        #[allow(unused_variables)]
        let $s = $a.rest($crate::protocol!(@count $($w)*));
    };

    (@build $name:ident $v:ident [{$($f:ident),*}] [] [$($b:ident),* $(,)?] []) => {
        $name::$v { $($f),* }
    };
    (@build $name:ident $v:ident [] [($($t:ty),*)] [$($b:ident),* $(,)?] []) => {
        $name::$v($($b),*)
    };
    (@build $name:ident $v:ident [] [] [$($b:ident),* $(,)?] []) => {
        $name::$v
    };
    (@build $name:ident $v:ident [$($f:tt)*] [$($t:tt)*] [$($b:ident),* $(,)?] [$e:expr]) => {
        $e
    };

    (@count $($w:ident)*) => {
        <[()]>::len(&[$($crate::protocol!(@unit $w)),*])
    };
    (@unit $w:ident) => {
        ()
    };

    (@arg text) => { &str };
    (@arg bytes) => { &[u8] };
    (@arg string) => { &[u8] };
    (@arg rest) => { &[u64] };
    (@arg items) => { &[($crate::abi::fpage::Fpage, u64)] };

    (@ret) => { Result<$crate::ipc::Msg, __Error> };
    (@ret []) => { Result<(), __Error> };
    (@ret [$($r:ident)+]) => { Result<[u64; $crate::protocol!(@count $($r)+)], __Error> };

    (@reply $m:ident) => { Ok($m) };
    (@reply $m:ident []) => {{
        let _ = $m;
        Ok(())
    }};
    (@reply $m:ident [$($r:ident)+]) => { Ok(core::array::from_fn(|k| $m.word(2 + k))) };

    (@error) => { type __Error = $crate::abi::Error; };
    (@error $t:ty) => { type __Error = $t; };

    (@call_here) => { use self::__call as __call_here; };
    (@call_here $p:path) => { use $p as __call_here; };

    (@call) => { use $crate::server::request as __call; };
    (@call $p:path) => { use $p as __call; };

    (@msg $l:path, [$($w:ident),*]) => {
        $crate::ipc::Msg::new($l, &[$($w),*])
    };
    (@msg $l:path, [$($w:ident),*] text $s:ident) => {{
        $crate::ipc::set_send_string($s.as_bytes());
        $crate::ipc::Msg::new($l, &[$($w),*]).with_string()
    }};
    (@msg $l:path, [$($w:ident),*] bytes $s:ident) => {{
        $crate::ipc::set_send_string($s);
        $crate::ipc::Msg::new($l, &[$($w),*]).with_string()
    }};
    (@msg $l:path, [$($w:ident),*] string $s:ident) => {
        $crate::protocol!(@msg $l, [$($w),*] bytes $s)
    };
    (@msg $l:path, [$($w:ident),*] items $s:ident) => {{
        let mut m = $crate::ipc::Msg::new($l, &[$($w),*]);
        if 2 * $s.len() > $crate::abi::ipc::MAX_MRS - 1 - m.words().len() {
            return Err($crate::abi::Error::TooLong.into());
        }
        for &(fp, control) in $s {
            m.push_item(fp, control);
        }
        m
    }};
    (@msg $l:path, [$($w:ident),*] rest $s:ident) => {{
        let head: &[u64] = &[$($w),*];
        let n = head.len() + $s.len();
        if n > $crate::abi::ipc::MAX_MRS - 1 {
            return Err($crate::abi::Error::TooLong.into());
        }
        let mut m = $crate::ipc::Msg::new($l, head);
        m.mr[1 + head.len()..=n].copy_from_slice($s);
        m.mr[0] = $crate::abi::ipc::Tag::new($l, n as u64).0;
        m
    }};
}
