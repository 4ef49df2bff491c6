_ckptool_completion() {
    local IFS=$'\n'
    local response completion type value

    response=$(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD=$COMP_CWORD _CKPTOOL_COMPLETE=bash_complete $1)

    for completion in $response; do
        type=${completion%%,*}
        value=${completion#*,}
        if [[ $type == 'dir' ]]; then
            COMPREPLY=()
            compopt -o dirnames
        elif [[ $type == 'file' ]]; then
            COMPREPLY=()
            compopt -o default
        elif [[ $type == 'path' ]]; then
            compopt -o filenames
            [[ $value == ?*/ ]] && value=${value%/}
            COMPREPLY+=("$value")
        elif [[ $type == 'plain' ]]; then
            COMPREPLY+=("$value")
        fi
    done

    return 0
}

_ckptool_completion_setup() {
    complete -o nosort -F _ckptool_completion ckptool
}

_ckptool_completion_setup;
