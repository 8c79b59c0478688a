//! `smcrun completions SHELL`: the shells' completion scripts, from clap's generators on the
//! command tree as an operator sees it (hidden commands left out, option values that are words
//! or free text instead of file names), and for bash what clap cannot do: like sudo, a program
//! after `smcrun [OPTIONS]` or `--` and its own arguments complete as that program's, and
//! `enable`/`disable` complete systemd services.

use clap::{Arg, ArgAction, Command, ValueHint};
use clap_complete::Shell;

/// Options whose values are never file names: their value names. Any other value-taking option
/// without a fixed set of words (`--config FILE`, `--textfile DIR`) keeps completing paths.
fn completes_paths(a: &Arg) -> bool {
    a.get_value_names()
        .into_iter()
        .flatten()
        .any(|n| ["FILE", "DIR", "PATH"].iter().any(|p| n.contains(p)))
}

/// Whether `a` takes a value (its action; num_args is only known once the tree is built).
fn takes_value(a: &Arg) -> bool {
    matches!(a.get_action(), ArgAction::Set | ArgAction::Append)
}

/// `a` as the completions see it: a value that is not a path completes as free text.
fn hinted(a: Arg) -> Arg {
    let takes_value = takes_value(&a);
    let words = a.get_value_parser().possible_values().is_some();
    if takes_value && !words && !completes_paths(&a) && a.get_value_hint() == ValueHint::Unknown {
        a.value_hint(ValueHint::Other)
    } else {
        a
    }
}

fn hinted_tree(c: Command) -> Command {
    c.mut_args(hinted).mut_subcommands(hinted_tree)
}

/// `c` without its hidden options (`metrics --replay`), which every generator would offer. clap
/// cannot remove an argument, so such a command is made anew from its shown parts (its name
/// must live as long as the program: this one prints a script and exits).
fn without_hidden_options(c: &Command) -> Command {
    if !c.get_arguments().any(|a| a.is_hide_set()) {
        return c.clone();
    }
    let name: &'static str = Box::leak(c.get_name().to_string().into_boxed_str());
    let mut n = Command::new(name)
        .args(c.get_arguments().filter(|a| !a.is_hide_set()).cloned())
        .subcommands(c.get_subcommands().map(without_hidden_options));
    if let Some(a) = c.get_about() {
        n = n.about(a.clone());
    }
    n
}

/// The tree the scripts are made from: `cli` without its hidden subcommands (`__capture`,
/// `__demo-worker`: never offered) and options, with value hints.
pub fn tree(cli: &Command) -> Command {
    let mut c = Command::new("smcrun")
        .allow_external_subcommands(true)
        .subcommand_value_name("COMMAND")
        .args(cli.get_arguments().cloned())
        .subcommands(
            cli.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(without_hidden_options),
        );
    c = c
        .disable_version_flag(true)
        .version(env!("CARGO_PKG_VERSION"));
    if let Some(a) = cli.get_about() {
        c = c.about(a.clone());
    }
    hinted_tree(c)
}

/// The options of the run line that take a value in the next word (`--mode inet`), which the
/// bash wrapper steps over to find the program.
fn value_options(cli: &Command) -> Vec<String> {
    let mut out = Vec::new();
    for a in cli.get_arguments() {
        // `--bpf[=WHEN]` takes its value only after `=`.
        if !takes_value(a) || a.is_require_equals_set() {
            continue;
        }
        if let Some(s) = a.get_short() {
            out.push(format!("-{s}"));
        }
        if let Some(l) = a.get_long() {
            out.push(format!("--{l}"));
        }
    }
    out
}

/// The bash wrapper around clap's `_smcrun`: finds the first word after the run options; `--` or
/// a word that is not a subcommand is a program, completed by bash-completion's
/// `_command_offset` (as sudo's is); `enable`/`disable` complete services; everything else is
/// clap's.
fn bash_wrapper(cli: &Command) -> String {
    let subcommands: Vec<&str> = cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name())
        .collect();
    let values = value_options(cli).join("|");
    let subs = subcommands.join(" ");
    let sub_case = subcommands.join("|");
    format!(
        r#"
# smcrun [OPTIONS] [--] COMMAND [ARGS...]: like sudo's, the program and its arguments complete as
# that program's own (bash-completion's _command_offset); subcommands and options are clap's.
_smcrun_main() {{
    local i=1 w cur=${{COMP_WORDS[COMP_CWORD]}}
    while [ "$i" -lt "$COMP_CWORD" ]; do
        w=${{COMP_WORDS[i]}}
        case $w in
        --) _smcrun_program $((i + 1)); return ;;
        {values})
            [ $((i + 1)) -eq "$COMP_CWORD" ] && {{ _smcrun "$@"; return; }}
            i=$((i + 2)) ;;
        -*) i=$((i + 1)) ;;
        enable | disable) _smcrun_unit "$w" $((i + 1)) "$@"; return ;;
        {sub_case}) _smcrun "$@"; return ;;
        *) _smcrun_program "$i"; return ;;
        esac
    done
    case $cur in
    -*) _smcrun "$@" ;;
    *) COMPREPLY=($(compgen -W "{subs}" -- "$cur") $(compgen -c -- "$cur" | grep -v '^_' | sort -u)) ;;
    esac
}}

# Completes the words from $1 on as a command line of their own.
_smcrun_program() {{
    if declare -F _command_offset > /dev/null; then
        _command_offset "$1"
    elif [ "$1" -eq "$COMP_CWORD" ]; then
        COMPREPLY=($(compgen -c -- "${{COMP_WORDS[COMP_CWORD]}}"))
    else
        COMPREPLY=($(compgen -f -- "${{COMP_WORDS[COMP_CWORD]}}"))
    fi
}}

# The unit of `smcrun enable|disable`: the services of the unit directories ($SYSTEMD_UNIT_PATH
# first, as smcrun itself looks), for disable only those with smcrun's drop-in.
_smcrun_unit() {{
    local which=$1 i=$2 cur=${{COMP_WORDS[COMP_CWORD]}} d f u
    shift 2
    while [ "$i" -lt "$COMP_CWORD" ] && [[ ${{COMP_WORDS[i]}} == -* ]]; do i=$((i + 1)); done
    if [ "$i" -ne "$COMP_CWORD" ] || [[ $cur == -* ]]; then
        _smcrun "$@"
        return
    fi
    local dirs=${{SYSTEMD_UNIT_PATH:-}}
    dirs=${{dirs//:/ }}
    # `smcrun enable` writes its drop-in under the first unit directory.
    local first=${{dirs%% *}}
    first=${{first:-/etc/systemd/system}}
    local units=()
    for d in $dirs /etc/systemd/system /run/systemd/system /lib/systemd/system /usr/lib/systemd/system; do
        for f in "$d"/*.service; do
            [ -e "$f" ] || continue
            u=${{f##*/}}
            u=${{u%.service}}
            [ "$which" = disable ] && [ ! -e "$first/$u.service.d/smcrun.conf" ] && continue
            units+=("$u")
        done
    done
    COMPREPLY=($(compgen -W "${{units[*]}}" -- "$cur" | sort -u))
}}

if [[ "${{BASH_VERSINFO[0]}}" -eq 4 && "${{BASH_VERSINFO[1]}}" -ge 4 || "${{BASH_VERSINFO[0]}}" -gt 4 ]]; then
    complete -F _smcrun_main -o nosort -o bashdefault -o default smcrun
else
    complete -F _smcrun_main -o bashdefault -o default smcrun
fi
"#
    )
}

/// The completion script for `shell`.
pub fn script(shell: Shell, cli: &Command) -> Vec<u8> {
    let mut t = tree(cli);
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut t, "smcrun", &mut out);
    let mut text = String::from_utf8_lossy(&out).into_owned();
    match shell {
        Shell::Bash => {
            // clap's own `complete` lines go: the wrapper registers itself instead.
            if let Some(i) = text.rfind("\nif [[ \"${BASH_VERSINFO[0]}\"") {
                text.truncate(i + 1);
            }
            text.push_str(&bash_wrapper(cli));
        }
        Shell::Fish => {
            // A program in the command's place, as for sudo.
            text.push_str(
                "complete -c smcrun -n \"__fish_smcrun_needs_command\" -f -a \"(__fish_complete_command)\"\n",
            );
        }
        _ => {}
    }
    text.into_bytes()
}
