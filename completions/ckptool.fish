function _ckptool_completion;
    set -l response (env _CKPTOOL_COMPLETE=fish_complete COMP_WORDS=(commandline -cp) COMP_CWORD=(commandline -t) ckptool);

    for completion in $response;
        set -l metadata (string split -m 1 "," $completion);

        if test $metadata[1] = "dir";
            __fish_complete_directories $metadata[2];
        else if test $metadata[1] = "file";
            __fish_complete_path $metadata[2];
        else if test $metadata[1] = "plain"; or test $metadata[1] = "path";
            echo $metadata[2];
        end;
    end;
end;

complete --no-files --command ckptool --arguments "(_ckptool_completion)";
